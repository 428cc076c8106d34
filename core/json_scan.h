// A strict JSON reader that calls back per value and builds nothing: the load generator reads
// one small JSON object per streamed token, and nlohmann-json's lexer (a push_back per byte into
// its token buffer) was a fifth of the generator's CPU even with a SAX handler. It accepts what
// nlohmann-json accepts (RFC 8259; strings valid UTF-8 with no surrogate code points, escapes
// decoded, surrogate pairs joined) except nesting deeper than kMaxJsonDepth, which no streamed
// chunk has. Iterative: a hostile "[[[[..." costs a byte of stack per level, up to the limit.
// tests/providers/json_scan_test.cc compares it with nlohmann-json on generated and mutated
// input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace berth {

inline constexpr size_t kMaxJsonDepth = 512;

/// What ScanJson calls, in document order. Strings (and keys) arrive decoded; the view is valid
/// only during the call. An integer that fits neither int64 nor uint64 arrives as a double.
class JsonHandler {
 public:
  virtual ~JsonHandler() = default;
  virtual void Null() = 0;
  virtual void Boolean(bool v) = 0;
  virtual void Signed(int64_t v) = 0;     // a negative integer
  virtual void Unsigned(uint64_t v) = 0;  // an integer >= 0
  virtual void Float(double v) = 0;       // any other number, as nlohmann-json reads it
  virtual void String(std::string_view s) = 0;
  virtual void Key(std::string_view k) = 0;
  virtual void StartObject() = 0;
  virtual void EndObject() = 0;
  virtual void StartArray() = 0;
  virtual void EndArray() = 0;

  /// Where ScanJson is in its text during a call: just past what it has read (in StartObject,
  /// past the '{' and the spaces after it; in EndObject, past the '}'). Only during a call.
  size_t Offset() const { return static_cast<size_t>(*cursor_ - begin_); }
  /// Called by ScanJson before the first call.
  void SetCursor(const char* const* cursor, const char* begin) {
    cursor_ = cursor;
    begin_ = begin;
  }

 private:
  const char* const* cursor_ = nullptr;
  const char* begin_ = nullptr;
};

/// Whether `text` opens more than `limit` arrays and objects inside one another (strings
/// skipped, escapes too; nothing else checked). nlohmann's parser recurses per level and a hostile
/// "[[[[..." 60,000 deep overflows its stack: readers of untrusted JSON ask this first.
bool JsonNestedDeeperThan(std::string_view text, size_t limit);

/// Reads `text` as one JSON value (whitespace around it allowed), calling `h` as it goes.
/// Returns false at the first byte that is not JSON (`h` may have been called before that).
bool ScanJson(std::string_view text, JsonHandler& h);

}  // namespace berth
