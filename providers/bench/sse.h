// Server-sent events (the text/event-stream that OpenAI-compatible servers stream completions
// in), read from bytes that arrive in chunks split anywhere, and the meaning of one event of a
// streamed completion. The server is untrusted: every buffer is bounded and nothing throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace berth {

/// Splits a byte stream into events (WHATWG "event stream" rules: lines end with \n, \r\n or
/// \r; "data:" lines are joined with \n; a blank line ends an event; ":" lines are comments;
/// other fields are ignored). Feed it the bytes as they come; it calls back once per event with
/// a non-empty data.
class SseParser {
 public:
  /// `max_event_bytes`: the longest line or event data accepted (default 1 MiB); a longer one
  /// makes Feed fail, and the stream is then unusable.
  explicit SseParser(size_t max_event_bytes = size_t{1} << 20) : max_(max_event_bytes) {}

  /// Consumes `bytes`; calls `on_event(std::string_view data)` for each complete event, in
  /// order. `on_event` returns false to stop (Feed then returns false at once). Returns false
  /// when a line or event is longer than the limit.
  template <typename OnEvent>
  bool Feed(std::string_view bytes, OnEvent&& on_event);

  /// Bytes held for an incomplete line or event.
  size_t buffered() const { return line_.size() + data_.size(); }
  /// Why Feed failed last: "" when it did not.
  const std::string& error() const { return error_; }

 private:
  /// One complete line (without its end); returns false when the callback stopped or the
  /// event grew past the limit.
  template <typename OnEvent>
  bool Line(std::string_view line, OnEvent& on_event);

  size_t max_;
  std::string line_;  // the incomplete line so far
  std::string data_;  // the current event's data so far
  bool has_data_ = false;
  bool skip_lf_ = false;  // the last chunk ended in \r: a \n opening the next one ends nothing
  std::string error_;
};

/// Where the line that starts at `pos` ends (its \r or \n), or npos. Two memchr calls:
/// string_view::find_first_of searched the set of two for every byte.
inline size_t LineEnd(std::string_view bytes, size_t pos) {
  const char* p = bytes.data() + pos;
  size_t n = bytes.size() - pos;
  const void* lf = std::memchr(p, '\n', n);
  size_t before = lf ? static_cast<size_t>(static_cast<const char*>(lf) - p) : n;
  if (const void* cr = std::memchr(p, '\r', before))
    return pos + static_cast<size_t>(static_cast<const char*>(cr) - p);
  return lf ? pos + before : std::string_view::npos;
}

/// What one event of a streamed /v1/completions or /v1/chat/completions answer says.
struct StreamEvent {
  enum class Kind {
    kChunk,      // a JSON chunk: content deltas and/or usage
    kDone,       // "data: [DONE]"
    kError,      // {"error": ...}: the server gave up mid-stream; `error` says why
    kMalformed,  // not JSON, or not an object; `error` says what is wrong
  };
  Kind kind = Kind::kMalformed;
  /// 1 when the chunk's first choice carries text (completions) or delta content or reasoning
  /// content (chat), else 0: one output token when the server sends a token per chunk. Only
  /// the first choice counts: berth asks for one (n = 1), and a server that answers with a
  /// thousand choices per chunk has not made a thousand tokens.
  uint32_t content_deltas = 0;
  /// The bytes of that content: no server makes more tokens than it sent bytes of text, so it
  /// bounds what `usage` may claim.
  uint64_t content_bytes = 0;
  bool has_usage = false;          // "usage" with a numeric completion_tokens
  uint64_t completion_tokens = 0;  // from usage
  /// llama.cpp's own account of the request (its "timings", on the last chunk): the tokens it
  /// generated and the milliseconds from the first of them to the last (predicted_n and
  /// predicted_ms). Only when both are numbers, predicted_ms finite and not negative.
  bool has_timings = false;
  uint64_t predicted_n = 0;
  double predicted_ms = 0;
  std::string error;
};

/// Reads one event's data. Never throws, whatever the bytes.
StreamEvent InterpretEvent(std::string_view data);

// --- implementation of the template members ---------------------------------------------------

template <typename OnEvent>
bool SseParser::Feed(std::string_view bytes, OnEvent&& on_event) {
  if (!error_.empty()) return false;
  size_t pos = 0;
  if (skip_lf_ && !bytes.empty()) {
    skip_lf_ = false;
    if (bytes[0] == '\n') pos = 1;
  }
  while (pos < bytes.size()) {
    size_t end = LineEnd(bytes, pos);
    if (end == std::string_view::npos) {
      if (line_.size() + (bytes.size() - pos) > max_) {
        error_ = "an event stream line longer than " + std::to_string(max_) + " bytes";
        return false;
      }
      line_.append(bytes.substr(pos));
      return true;
    }
    bool ok;
    if (line_.empty()) {
      ok = Line(bytes.substr(pos, end - pos), on_event);
    } else {
      if (line_.size() + (end - pos) > max_) {
        error_ = "an event stream line longer than " + std::to_string(max_) + " bytes";
        return false;
      }
      line_.append(bytes.substr(pos, end - pos));
      ok = Line(std::string_view(line_), on_event);
      line_.clear();  // Line reads line_ only before it calls back; the capacity stays
    }
    if (!ok) return false;
    pos = end + 1;
    if (bytes[end] == '\r') {
      if (pos < bytes.size()) {
        if (bytes[pos] == '\n') ++pos;
      } else {
        skip_lf_ = true;
      }
    }
  }
  return true;
}

template <typename OnEvent>
bool SseParser::Line(std::string_view line, OnEvent& on_event) {
  if (line.empty()) {  // the end of an event
    if (!has_data_) return true;
    has_data_ = false;
    if (data_.empty()) return true;
    bool go_on = on_event(std::string_view(data_));
    data_.clear();
    return go_on;
  }
  if (line[0] == ':') return true;  // a comment (keep-alive)
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  if (field != "data") return true;  // event:, id:, retry: and unknown fields
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (data_.size() + value.size() + 1 > max_) {
    error_ = "an event longer than " + std::to_string(max_) + " bytes";
    return false;
  }
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
  return true;
}

}  // namespace berth
