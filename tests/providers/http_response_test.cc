// HttpResponseReader: heads, lengths, chunks and closes, split anywhere; what it refuses.
#include "providers/bench/http_response.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace berth {
namespace {

using State = HttpResponseReader::State;

struct Read {
  State state = State::kMore;
  std::string body;
  size_t consumed = 0;
};

/// Feeds `bytes` in pieces of at most `piece` bytes.
Read FeedAll(HttpResponseReader* r, const std::string& bytes, size_t piece = SIZE_MAX) {
  Read out;
  for (size_t pos = 0; pos < bytes.size() && out.state == State::kMore;) {
    size_t n = std::min(piece, bytes.size() - pos);
    size_t used = 0;
    out.state = r->Feed(
        std::string_view(bytes).substr(pos, n),
        [&](std::string_view b) {
          out.body.append(b);
          return true;
        },
        &used);
    out.consumed += used;
    pos += n;
  }
  return out;
}

const char kChunked[] =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    "6\r\ndata: \r\n"
    "1a;ext=1\r\n{\"choices\":[{\"text\":\"a\"}]}\r\n"
    "2\r\n\n\n\r\n"
    "0\r\nX-Trailer: 1\r\n\r\n";

TEST(HttpResponseReader, ChunkedBodySplitAnywhere) {
  std::string body = "data: {\"choices\":[{\"text\":\"a\"}]}\n\n";
  for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, SIZE_MAX}) {
    HttpResponseReader r;
    Read got = FeedAll(&r, kChunked, piece);
    EXPECT_EQ(got.state, State::kComplete) << piece;
    EXPECT_EQ(got.body, body) << piece;
    EXPECT_EQ(r.status(), 200);
    EXPECT_TRUE(r.keep_alive());
  }
}

TEST(HttpResponseReader, ContentLengthEndsTheAnswerAndLeavesWhatFollows) {
  HttpResponseReader r;
  Read got = FeedAll(&r, "HTTP/1.1 404 Not Found\r\ncontent-length: 4\r\n\r\nboomEXTRA");
  EXPECT_EQ(got.state, State::kComplete);
  EXPECT_EQ(got.body, "boom");
  EXPECT_EQ(got.consumed,
            std::string("HTTP/1.1 404 Not Found\r\ncontent-length: 4\r\n\r\nboom").size());
  EXPECT_EQ(r.status(), 404);
  EXPECT_TRUE(r.keep_alive());
}

TEST(HttpResponseReader, WithoutALengthTheCloseEndsIt) {
  HttpResponseReader r;
  Read got = FeedAll(&r, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ndata: [DONE]\n\n");
  EXPECT_EQ(got.state, State::kMore);
  EXPECT_EQ(r.Eof(), State::kComplete);
  EXPECT_EQ(got.body, "data: [DONE]\n\n");
  EXPECT_FALSE(r.keep_alive());
}

TEST(HttpResponseReader, ACloseBeforeTheEndIsAFailureSayingWhere) {
  HttpResponseReader none;
  EXPECT_EQ(none.Eof(), State::kFailed);
  EXPECT_EQ(none.error(), "the server closed the connection without an answer");
  EXPECT_EQ(none.bytes_seen(), 0u);
  HttpResponseReader chunked;
  FeedAll(&chunked, std::string(kChunked).substr(0, 100));
  EXPECT_EQ(chunked.Eof(), State::kFailed);
  EXPECT_EQ(chunked.error(),
            "the server closed the connection in the middle of the answer (before its last "
            "chunk)");
  HttpResponseReader length;
  FeedAll(&length, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
  EXPECT_EQ(length.Eof(), State::kFailed);
  EXPECT_NE(length.error().find("short of its Content-Length"), std::string::npos);
}

TEST(HttpResponseReader, RefusesWhatIsNotHttpOrPassesALimit) {
  HttpResponseReader junk;
  EXPECT_EQ(FeedAll(&junk, "SSH-2.0-OpenSSH\r\n\r\n").state, State::kFailed);
  EXPECT_NE(junk.error().find("not an HTTP/1.x answer: 'SSH-2.0-OpenSSH'"), std::string::npos);
  HttpResponseReader endless;
  EXPECT_EQ(FeedAll(&endless, "HTTP/1.1 200 OK\r\nX: " + std::string(100000, 'a')).state,
            State::kFailed);
  EXPECT_NE(endless.error().find("head longer than 65536 bytes"), std::string::npos);
  HttpResponseReader size;
  EXPECT_EQ(FeedAll(&size,
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "ffffffffffffffff\r\n")
                .state,
            State::kFailed);
  HttpResponseReader no_size;
  EXPECT_EQ(FeedAll(&no_size, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").state,
            State::kFailed);
  HttpResponseReader bad_end;
  EXPECT_EQ(FeedAll(&bad_end,
                    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "1\r\naXY\r\n")
                .state,
            State::kFailed);
  HttpResponseReader bad_length;
  EXPECT_EQ(FeedAll(&bad_length, "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n").state,
            State::kFailed);
}

TEST(HttpResponseReader, ABodyThatIsRefusedStopsTheRead) {
  HttpResponseReader r;
  State s = r.Feed(kChunked, [&](std::string_view) {
    r.Fail("an event longer than 4 bytes");
    return false;
  });
  EXPECT_EQ(s, State::kFailed);
  EXPECT_EQ(r.error(), "an event longer than 4 bytes");
}

TEST(HttpResponseReader, Http10AndConnectionCloseAreNotKeptAlive) {
  HttpResponseReader old;
  FeedAll(&old, "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
  EXPECT_FALSE(old.keep_alive());
  HttpResponseReader closing;
  FeedAll(&closing, "HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 1\r\n\r\nx");
  EXPECT_FALSE(closing.keep_alive());
}

TEST(HttpResponseReader, RandomBytesNeverThrowAndStayBounded) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string bytes = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    size_t n = rng() % 400;
    for (size_t j = 0; j < n; ++j) bytes += "0123456789abcdef\r\n;x"[rng() % 21];
    HttpResponseReader r;
    FeedAll(&r, bytes, 1 + rng() % 16);
    r.Eof();
  }
}

}  // namespace
}  // namespace berth
