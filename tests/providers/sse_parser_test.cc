#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "providers/bench/sse.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

/// Feeds `pieces` one after another; returns the events (or stops at the first failure).
std::vector<std::string> Events(SseParser* p, const std::vector<std::string>& pieces,
                                bool* ok = nullptr) {
  std::vector<std::string> out;
  bool all = true;
  for (const auto& piece : pieces) {
    all = p->Feed(piece, [&](std::string_view e) {
      out.emplace_back(e);
      return true;
    });
    if (!all) break;
  }
  if (ok) *ok = all;
  return out;
}

std::vector<std::string> Split(const std::string& text, std::mt19937* rng) {
  std::vector<std::string> pieces;
  size_t i = 0;
  while (i < text.size()) {
    size_t n = std::uniform_int_distribution<size_t>(0, 7)(*rng) == 0
                   ? 0
                   : std::uniform_int_distribution<size_t>(1, 40)(*rng);
    pieces.push_back(text.substr(i, n));
    i += n;
  }
  return pieces;
}

TEST(SseParser, ReadsAStreamedCompletion) {
  SseParser p;
  auto events =
      Events(&p, {"data: {\"a\":1}\n\ndata: {\"a\":2}\n\n: keep-alive\n\ndata: [DONE]\n\n"});
  EXPECT_THAT(events, ElementsAre("{\"a\":1}", "{\"a\":2}", "[DONE]"));
  EXPECT_EQ(p.buffered(), 0u);
}

TEST(SseParser, JoinsDataLinesAndIgnoresOtherFields) {
  SseParser p;
  auto events = Events(&p, {"event: x\nid: 7\ndata:one\ndata: two\nretry: 5\n\n", "data\n\n"});
  // "data" alone is an empty data line: an event with empty data is not dispatched.
  EXPECT_THAT(events, ElementsAre("one\ntwo"));
}

TEST(SseParser, EveryLineEndingAndAnIncompleteLastEvent) {
  SseParser p;
  auto events = Events(&p, {"data: a\r\n\r\ndata: b\r\rdata: c\n\ndata: d"});
  EXPECT_THAT(events, ElementsAre("a", "b", "c"));
  EXPECT_EQ(p.buffered(), 7u);  // "data: d" waits for its line end
}

TEST(SseParser, CrLfSplitBetweenChunksEndsOneLine) {
  SseParser p;
  auto events = Events(&p, {"data: a\r", "\n", "\r", "\n", "data: b\n\n"});
  EXPECT_THAT(events, ElementsAre("a", "b"));
}

TEST(SseParser, RandomSplitsGiveTheSameEvents) {
  std::string stream;
  std::vector<std::string> want;
  std::mt19937 rng(42);
  const char* ends[] = {"\n", "\r\n", "\r"};
  for (int i = 0; i < 200; ++i) {
    std::string data = "{\"choices\":[{\"text\":\" tok" + std::to_string(i) + "\"}]}";
    const char* end = ends[i % 3];
    stream += (i % 5 == 0 ? std::string(": ping") + end : "") + "data: " + data + end + end;
    want.push_back(data);
  }
  stream += "data: [DONE]\n\n";
  want.push_back("[DONE]");
  for (int round = 0; round < 300; ++round) {
    SseParser p;
    bool ok = false;
    auto got = Events(&p, Split(stream, &rng), &ok);
    ASSERT_TRUE(ok);
    ASSERT_EQ(got, want) << "round " << round;
  }
}

TEST(SseParser, RandomBytesNeverThrowAndStayBounded) {
  std::mt19937 rng(7);
  const std::string alphabet = "data: {}[]\"\\\r\n:xyz0";
  for (int round = 0; round < 500; ++round) {
    std::string junk;
    size_t n = std::uniform_int_distribution<size_t>(0, 600)(rng);
    for (size_t i = 0; i < n; ++i)
      junk += round % 2 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng() & 0xff);
    SseParser p(64);
    for (const auto& piece : Split(junk, &rng)) {
      bool ok = p.Feed(piece, [](std::string_view e) {
        InterpretEvent(e);  // whatever it is, no exception
        return true;
      });
      ASSERT_LE(p.buffered(), 2 * 64u);
      if (!ok) break;
    }
  }
}

TEST(SseParser, ALineLongerThanTheLimitFails) {
  SseParser p(16);
  bool ok = true;
  auto events = Events(&p, {"data: 0123456789", "abcdefghij"}, &ok);
  EXPECT_FALSE(ok);
  EXPECT_THAT(p.error(), HasSubstr("longer than 16 bytes"));
  EXPECT_FALSE(p.Feed("\n\n", [](std::string_view) { return true; }));  // stays broken
}

TEST(SseParser, AnEventOfManyShortLinesLongerThanTheLimitFails) {
  SseParser p(16);
  bool ok = true;
  Events(&p, {"data: 12345\ndata: 12345\ndata: 12345\n"}, &ok);
  EXPECT_FALSE(ok);
  EXPECT_THAT(p.error(), HasSubstr("an event longer than 16 bytes"));
}

TEST(SseParser, TheCallbackStopsTheFeed) {
  SseParser p;
  int seen = 0;
  EXPECT_FALSE(p.Feed("data: a\n\ndata: b\n\n", [&](std::string_view) { return ++seen < 1; }));
  EXPECT_EQ(seen, 1);
}

TEST(InterpretEvent, CompletionChunksChatDeltasAndUsage) {
  StreamEvent e = InterpretEvent(R"({"choices":[{"index":0,"text":" hi","finish_reason":null}]})");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kChunk);
  EXPECT_EQ(e.content_deltas, 1u);
  EXPECT_FALSE(e.has_usage);
  e = InterpretEvent(R"({"choices":[{"delta":{"role":"assistant","content":""}}]})");
  EXPECT_EQ(e.content_deltas, 0u);  // a role announcement carries no token
  e = InterpretEvent(R"({"choices":[{"delta":{"reasoning_content":"think"}}]})");
  EXPECT_EQ(e.content_deltas, 1u);
  EXPECT_EQ(e.content_bytes, 5u);
  // berth asks for one choice (n = 1): more choices in a chunk make no more tokens.
  e = InterpretEvent(
      R"({"choices":[{"delta":{"content":"x"}},{"delta":{"reasoning_content":"y"}}]})");
  EXPECT_EQ(e.content_deltas, 1u);
  EXPECT_EQ(e.content_bytes, 1u);
  e = InterpretEvent(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":17}})");
  EXPECT_TRUE(e.has_usage);
  EXPECT_EQ(e.completion_tokens, 17u);
  e = InterpretEvent(R"({"choices":[],"usage":{"completion_tokens":-4}})");
  EXPECT_FALSE(e.has_usage);
  e = InterpretEvent(R"({"choices":"nope","usage":null})");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kChunk);
  EXPECT_EQ(e.content_deltas, 0u);
  EXPECT_EQ(InterpretEvent("[DONE]").kind, StreamEvent::Kind::kDone);
}

TEST(InterpretEvent, ErrorsAndMalformedEvents) {
  StreamEvent e = InterpretEvent(R"({"error":{"message":"out of KV cache","code":500}})");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kError);
  EXPECT_THAT(e.error, HasSubstr("out of KV cache"));
  e = InterpretEvent("{\"choices\": [");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kMalformed);
  EXPECT_THAT(e.error, HasSubstr("not a JSON object"));
  EXPECT_EQ(InterpretEvent("[1,2]").kind, StreamEvent::Kind::kMalformed);
  EXPECT_EQ(InterpretEvent(std::string(100000, '[')).kind, StreamEvent::Kind::kMalformed);
}

// The chunk is read field by field as it is parsed (no document is built); it must read what a
// document would: the last of a repeated key, only the fields at their place (a "text" or
// "usage" nested elsewhere is not one), "error": null is no error, a float is no token count.
TEST(InterpretEvent, ReadsWhatADocumentWouldSay) {
  StreamEvent e = InterpretEvent(R"({"choices":[{"text":"abc","text":""}]})");
  EXPECT_EQ(e.content_deltas, 0u);
  e = InterpretEvent(R"({"choices":[{"text":""}],"choices":[{"text":"abcd"}]})");
  EXPECT_EQ(e.content_bytes, 4u);
  e = InterpretEvent(
      R"({"x":{"choices":[{"text":"no"}],"usage":{"completion_tokens":9}},)"
      R"("choices":[{"logprobs":{"text":"no","delta":{"content":"no"}},"delta":[{"content":"n"}]}]})");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kChunk);
  EXPECT_EQ(e.content_deltas, 0u);
  EXPECT_FALSE(e.has_usage);
  e = InterpretEvent(R"({"choices":[[{"text":"no"}],{"text":"no"}]})");
  EXPECT_EQ(e.content_deltas, 0u);
  e = InterpretEvent(R"({"error":null,"choices":[{"delta":{"content":"ok"}}]})");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kChunk);
  EXPECT_EQ(e.content_bytes, 2u);
  e = InterpretEvent(R"({"error":"overloaded"})");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kError);
  EXPECT_THAT(e.error, HasSubstr("overloaded"));
  e = InterpretEvent(R"({"error":{"message":"first"},"error":null})");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kChunk);
  e = InterpretEvent(R"({"usage":{"completion_tokens":3.5}})");
  EXPECT_FALSE(e.has_usage);
  e = InterpretEvent(R"({"usage":{"completion_tokens":7,"completion_tokens":8}})");
  EXPECT_EQ(e.completion_tokens, 8u);
  e = InterpretEvent(R"({"choices":[{"text":"a"}]} trailing)");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kMalformed);
}

// llama.cpp's last chunk carries its own account of the request (timings): the tokens it
// generated and the milliseconds it spent on them, read beside usage. Both must be numbers,
// predicted_ms finite and not negative, or the chunk carries no account; a nested or repeated
// "timings" reads as a document would.
TEST(InterpretEvent, LlamaCppTimingsAreTheServersOwnAccount) {
  StreamEvent e = InterpretEvent(
      R"({"choices":[{"text":"","index":0,"finish_reason":"length"}],)"
      R"("usage":{"completion_tokens":8,"prompt_tokens":3,"total_tokens":11},)"
      R"("timings":{"cache_n":0,"prompt_n":3,"prompt_ms":6.152,"predicted_n":8,)"
      R"("predicted_ms":16.947,"predicted_per_token_ms":2.421,"predicted_per_second":413.05}})");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kChunk);
  EXPECT_EQ(e.completion_tokens, 8u);
  EXPECT_TRUE(e.has_timings);
  EXPECT_EQ(e.predicted_n, 8u);
  EXPECT_DOUBLE_EQ(e.predicted_ms, 16.947);
  e = InterpretEvent(R"({"timings":{"predicted_n":4,"predicted_ms":12}})");
  EXPECT_TRUE(e.has_timings);
  EXPECT_DOUBLE_EQ(e.predicted_ms, 12.0);
  for (const char* hostile : {
           R"({"timings":{"predicted_n":4}})",
           R"({"timings":{"predicted_ms":4.5}})",
           R"({"timings":{"predicted_n":-1,"predicted_ms":4.5}})",
           R"({"timings":{"predicted_n":2.5,"predicted_ms":4.5}})",
           R"({"timings":{"predicted_n":4,"predicted_ms":-0.5}})",
           R"({"timings":{"predicted_n":4,"predicted_ms":1e999}})",
           R"({"timings":{"predicted_n":4,"predicted_ms":"12"}})",
           R"({"timings":[{"predicted_n":4,"predicted_ms":12}]})",
           R"({"x":{"timings":{"predicted_n":4,"predicted_ms":12}}})",
           R"({"timings":{"predicted_n":4,"predicted_ms":12},"timings":null})",
           R"({"timings":{"predicted_n":4,"predicted_ms":12,"predicted_n":null}})",
       }) {
    e = InterpretEvent(hostile);
    EXPECT_FALSE(e.has_timings) << hostile;
  }
  e = InterpretEvent(R"({"timings":{"predicted_n":18446744073709551615,"predicted_ms":0}})");
  EXPECT_TRUE(e.has_timings);  // read as given; the load generator bounds it by max_tokens
  EXPECT_EQ(e.predicted_n, 18446744073709551615u);
}

// What a server streams is quoted in the first error, which bench.json, -o json and the terminal
// carry: its stray bytes and controls are \xNN, and a cut never splits a character.
TEST(InterpretEvent, AnEventsTextIsQuotedEscapedAndCutOnACharacter) {
  StreamEvent e = InterpretEvent("{\"choices\":[{\"text\":\" tok0\xff\"}]}");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kMalformed);
  EXPECT_THAT(e.error, HasSubstr(" tok0\\xff"));
  e = InterpretEvent(R"({"error":{"message":"bad\r\n\u001b[2J"}})");
  EXPECT_EQ(e.kind, StreamEvent::Kind::kError);
  EXPECT_THAT(e.error, HasSubstr("mid-stream: bad\\x0d\\x0a\\x1b[2J"));
  std::string long_text = "[";
  for (int i = 0; i < 100; ++i) long_text += "\xc3\xa9";  // é, two bytes each
  e = InterpretEvent(long_text);
  EXPECT_EQ(e.kind, StreamEvent::Kind::kMalformed);
  EXPECT_THAT(e.error, HasSubstr("'[" + long_text.substr(1, 198) + "...'"));
}

}  // namespace
}  // namespace berth
