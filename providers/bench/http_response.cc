#include "providers/bench/http_response.h"

#include <charconv>

#include "core/untrusted_text.h"

namespace berth {
namespace {

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// Whether the comma-separated header value `list` holds `token` (case-insensitive).
bool HasToken(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (EqualsIgnoringCase(Trim(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

bool HttpResponseReader::ParseHead() {
  std::string_view head(head_);
  size_t eol = head.find("\r\n");
  std::string_view status_line = head.substr(0, eol);
  // "HTTP/1.1 200 OK": the version, a space, three digits.
  if (status_line.size() < 12 || status_line.substr(0, 7) != "HTTP/1." || status_line[8] != ' ') {
    Fail("not an HTTP/1.x answer: '" + Excerpt(status_line, 80) + "'");
    return false;
  }
  auto [end, ec] = std::from_chars(status_line.data() + 9, status_line.data() + 12, status_);
  if (ec != std::errc() || end != status_line.data() + 12 || status_ < 100) {
    Fail("an HTTP status line without a status: '" + Excerpt(status_line, 80) + "'");
    return false;
  }
  keep_alive_ = status_line[7] == '1';  // HTTP/1.0 closes unless it says otherwise
  bool chunked = false, has_length = false;
  uint64_t length = 0;
  head.remove_prefix(eol + 2);
  while (!head.empty()) {
    eol = head.find("\r\n");
    std::string_view line = head.substr(0, eol);
    head.remove_prefix(eol == std::string_view::npos ? head.size() : eol + 2);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // the empty last line, or junk
    std::string_view name = line.substr(0, colon);
    std::string_view value = Trim(line.substr(colon + 1));
    if (EqualsIgnoringCase(name, "transfer-encoding")) {
      chunked = HasToken(value, "chunked");
    } else if (EqualsIgnoringCase(name, "content-length")) {
      auto [e, err] = std::from_chars(value.data(), value.data() + value.size(), length);
      if (err != std::errc() || e != value.data() + value.size()) {
        Fail("an HTTP Content-Length that is not a number: '" + Excerpt(value, 40) + "'");
        return false;
      }
      has_length = true;
    } else if (EqualsIgnoringCase(name, "connection")) {
      if (HasToken(value, "close")) keep_alive_ = false;
      if (HasToken(value, "keep-alive")) keep_alive_ = true;
    }
  }
  if (status_ == 204 || status_ == 304) {
    phase_ = Phase::kLength;
    remaining_ = 0;
  } else if (chunked) {
    phase_ = Phase::kChunkSize;
  } else if (has_length) {
    phase_ = Phase::kLength;
    remaining_ = length;
  } else {
    phase_ = Phase::kUntilClose;
    until_close_ = true;
  }
  return true;
}

HttpResponseReader::State HttpResponseReader::Eof() {
  if (state_ != State::kMore) return state_;
  if (phase_ == Phase::kUntilClose) {
    state_ = State::kComplete;
    return state_;
  }
  if (phase_ == Phase::kHead)
    Fail(seen_ == 0 ? "the server closed the connection without an answer"
                    : "the server closed the connection in the middle of the answer's head");
  else
    Fail("the server closed the connection in the middle of the answer (" +
         std::string(phase_ == Phase::kLength ? "short of its Content-Length"
                                              : "before its last chunk") +
         ")");
  return state_;
}

}  // namespace berth
