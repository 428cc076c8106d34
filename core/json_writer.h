// JSON written as it is made, without a document: the text nlohmann's dump(2) gives for the
// same members in the same order, byte for byte (`berth plan -o json` of 10,000 services is
// 37 MB; building it as documents first took most of the plan's time and memory).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace berth {

/// Appends pretty-printed JSON (two spaces per level) to a string. Strings that are not UTF-8
/// are written with their stray bytes as "\xNN" (VisibleBytes), as DumpJson does: it never
/// throws on what a server or a unit file sent.
///
///   JsonWriter w(&text);
///   w.BeginObject().Field("step", 1).Field("ports", std::vector<int>{8000}).EndObject();
class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}
  /// A writer that goes on inside an array already open `depth` levels down (its items are
  /// indented depth + 1 levels), `first`: no item written yet. Parts of one array can be made
  /// apart, on any thread, and joined in order.
  static JsonWriter InArray(std::string* out, int depth, bool first);

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view key);
  /// Items that parts made with InArray wrote into the array open here, when `any`: EndArray
  /// then closes it as one that has items.
  JsonWriter& ItemsWrittenElsewhere(bool any) {
    if (any) levels_.back().first = false;
    return *this;
  }

  JsonWriter& Value(std::string_view s);
  JsonWriter& Value(const std::string& s) { return Value(std::string_view(s)); }
  JsonWriter& Value(const char* s) { return Value(std::string_view(s)); }
  JsonWriter& Value(bool b);
  JsonWriter& Value(double d);
  JsonWriter& Value(std::nullptr_t);
  template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool> &&
           !std::is_same_v<T, char>) JsonWriter& Value(T n) {
    if constexpr (std::is_signed_v<T>)
      return Signed(static_cast<int64_t>(n));
    else
      return Unsigned(static_cast<uint64_t>(n));
  }
  template <class T>
  JsonWriter& Value(const std::vector<T>& items) {
    BeginArray();
    for (const T& item : items) Value(item);
    return EndArray();
  }
  /// A map as an object; integer keys are written as their decimal text.
  template <class K, class V>
  JsonWriter& Value(const std::map<K, V>& members) {
    BeginObject();
    for (const auto& [k, v] : members) {
      if constexpr (std::is_integral_v<K>)
        Key(std::to_string(k));
      else
        Key(k);
      Value(v);
    }
    return EndObject();
  }
  template <class T>
  JsonWriter& Value(const std::optional<T>& v) {
    return v ? Value(*v) : Value(nullptr);
  }
  /// A value built as a document (the rare, small ones: recorded gate figures).
  JsonWriter& Value(const nlohmann::ordered_json& j);

  template <class T>
  JsonWriter& Field(std::string_view key, const T& value) {
    Key(key);
    return Value(value);
  }

 private:
  struct Level {
    bool array;
    bool first;
  };
  JsonWriter& Signed(int64_t n);
  JsonWriter& Unsigned(uint64_t n);
  JsonWriter& Raw(std::string_view text);  // a scalar's text, as it is
  // What comes before a value: nothing after a key; in an array, the separator and the
  // item's indentation.
  void BeforeValue();
  void Newline(size_t depth);
  void String(std::string_view s);

  std::string* out_;
  std::vector<Level> levels_;
  size_t base_depth_ = 0;  // levels open before this writer began (InArray)
  bool after_key_ = false;
};

}  // namespace berth
