// An HTTP/1.1 response read from bytes that arrive in pieces split anywhere: the status line,
// the headers the load generator needs (Content-Length, Transfer-Encoding: chunked, Connection),
// and the body, de-chunked, handed on as it comes. Pure: no socket. The server is untrusted:
// the head and a chunk's size line are bounded, and nothing throws.
//
// The load generator reads its streams with it instead of libcurl: libcurl 7.88 follows every
// read of a socket with a poll(2) of it (cf_socket_data_pending), and at a token per read that
// was a third of the generator's system calls (tests/bench/loadgen/README.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace berth {

class HttpResponseReader {
 public:
  enum class State {
    kMore,      // needs more bytes
    kComplete,  // the response ended; bytes after it were not consumed
    kFailed,    // not HTTP/1.x, or beyond a limit; error() says why
  };

  /// Reads `bytes`; calls `on_body(std::string_view)` for each piece of body (de-chunked), which
  /// returns false to stop (Feed then returns kFailed with error() as set by the caller's
  /// `Fail`). `consumed`, when not null, is set to the bytes used (less than all on
  /// kComplete).
  template <typename OnBody>
  State Feed(std::string_view bytes, OnBody&& on_body, size_t* consumed = nullptr);

  /// The connection was closed by the server: kComplete when that ends the response (no length
  /// was given), else kFailed with error() saying what was missing.
  State Eof();

  /// Marks the response failed (an on_body that stopped says why).
  void Fail(std::string why) {
    error_ = std::move(why);
    state_ = State::kFailed;
  }

  bool has_status() const { return phase_ != Phase::kHead; }
  int status() const { return status_; }
  /// Whether the connection may carry the next request (HTTP/1.1 without Connection: close,
  /// and the response ended by its length or last chunk).
  bool keep_alive() const { return keep_alive_ && state_ == State::kComplete && !until_close_; }
  /// Bytes of the response seen so far (head included): 0 means the server sent nothing.
  uint64_t bytes_seen() const { return seen_; }
  const std::string& error() const { return error_; }

  static constexpr size_t kMaxHead = 64 * 1024;

 private:
  enum class Phase { kHead, kLength, kChunkSize, kChunkData, kChunkDataEnd, kTrailer, kUntilClose };

  /// Parses the complete head in head_; sets the phase for the body.
  bool ParseHead();
  State Failed(std::string why) {
    Fail(std::move(why));
    return state_;
  }

  Phase phase_ = Phase::kHead;
  State state_ = State::kMore;
  std::string head_;  // the head so far, or a chunk size or trailer line so far
  int status_ = 0;
  bool keep_alive_ = true;
  bool until_close_ = false;
  uint64_t remaining_ = 0;  // of the body (kLength) or of the chunk (kChunkData)
  uint64_t seen_ = 0;
  std::string error_;
};

// --- implementation of the template member ----------------------------------------------------

template <typename OnBody>
HttpResponseReader::State HttpResponseReader::Feed(std::string_view bytes, OnBody&& on_body,
                                                   size_t* consumed) {
  size_t pos = 0;
  auto done = [&](State s) {
    if (consumed) *consumed = pos;
    return s;
  };
  if (state_ != State::kMore) return done(state_);
  seen_ += bytes.size();
  while (pos < bytes.size()) {
    std::string_view rest = bytes.substr(pos);
    switch (phase_) {
      case Phase::kHead: {
        // The head ends with an empty line; look for it across what came before too.
        size_t before = head_.size();
        size_t take = std::min(rest.size(), kMaxHead + 4 - before);
        head_.append(rest.substr(0, take));
        size_t end = head_.find("\r\n\r\n", before >= 3 ? before - 3 : 0);
        if (end == std::string::npos) {
          if (head_.size() > kMaxHead)
            return done(Failed("an HTTP head longer than " + std::to_string(kMaxHead) + " bytes"));
          pos += take;
          break;
        }
        pos += end + 4 - before;
        head_.resize(end + 4);
        if (!ParseHead()) return done(state_);
        head_.clear();
        if (phase_ == Phase::kLength && remaining_ == 0) {
          state_ = State::kComplete;
          return done(state_);
        }
        break;
      }
      case Phase::kLength:
      case Phase::kChunkData:
      case Phase::kUntilClose: {
        size_t n = phase_ == Phase::kUntilClose
                       ? rest.size()
                       : static_cast<size_t>(std::min<uint64_t>(remaining_, rest.size()));
        if (n > 0 && !on_body(rest.substr(0, n))) {
          pos += n;
          if (state_ != State::kFailed) Fail("the body was refused");
          return done(state_);
        }
        pos += n;
        if (phase_ == Phase::kUntilClose) break;
        remaining_ -= n;
        if (remaining_ > 0) break;
        if (phase_ == Phase::kLength) {
          state_ = State::kComplete;
          return done(state_);
        }
        phase_ = Phase::kChunkDataEnd;
        break;
      }
      case Phase::kChunkDataEnd:
      case Phase::kChunkSize:
      case Phase::kTrailer: {
        // A line: the CRLF after a chunk's data, a chunk's size, or a trailer.
        size_t lf = rest.find('\n');
        size_t take = lf == std::string_view::npos ? rest.size() : lf + 1;
        if (head_.size() + take > 1024)
          return done(Failed("an HTTP chunk line longer than 1024 bytes"));
        head_.append(rest.substr(0, take));
        pos += take;
        if (lf == std::string_view::npos) break;
        std::string_view line(head_);
        line.remove_suffix(1);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (phase_ == Phase::kChunkDataEnd) {
          if (!line.empty()) return done(Failed("an HTTP chunk not followed by its line end"));
          phase_ = Phase::kChunkSize;
        } else if (phase_ == Phase::kChunkSize) {
          uint64_t size = 0;
          size_t digits = 0;
          for (char c : line) {
            int v = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
            if (v < 0) break;  // a chunk extension (";...") or spaces follow
            if (++digits > 15) return done(Failed("an HTTP chunk size beyond 15 hex digits"));
            size = size * 16 + static_cast<uint64_t>(v);
          }
          if (digits == 0) return done(Failed("an HTTP chunk without a size"));
          remaining_ = size;
          phase_ = size == 0 ? Phase::kTrailer : Phase::kChunkData;
        } else if (line.empty()) {  // the end of the trailers: the response is complete
          head_.clear();
          state_ = State::kComplete;
          return done(state_);
        }
        head_.clear();
        break;
      }
    }
  }
  return done(state_);
}

}  // namespace berth
