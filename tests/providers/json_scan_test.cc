// ScanJson and the chunk reader built on it must accept what nlohmann-json accepts and read
// what a document says: compared on hand-picked edge cases and on many generated and mutated
// chunks (random bytes, cuts, UTF-8 edges, escapes, numbers at their limits).
#include "core/json_scan.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "providers/bench/sse.h"

namespace berth {
namespace {

/// Accepts everything, remembers nothing: for acceptance alone.
class Ignore : public JsonHandler {
 public:
  void Null() override {}
  void Boolean(bool) override {}
  void Signed(int64_t) override {}
  void Unsigned(uint64_t) override {}
  void Float(double) override {}
  void String(std::string_view) override {}
  void Key(std::string_view) override {}
  void StartObject() override {}
  void EndObject() override {}
  void StartArray() override {}
  void EndArray() override {}
};

bool Scans(const std::string& s) {
  Ignore h;
  return ScanJson(s, h);
}

bool NlohmannAccepts(const std::string& s) { return nlohmann::json::accept(s); }

/// What InterpretEvent said before ScanJson: the chunk read as a nlohmann-json document.
StreamEvent Reference(std::string_view data) {
  StreamEvent e;
  nlohmann::json j = nlohmann::json::parse(data.begin(), data.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    e.kind = StreamEvent::Kind::kMalformed;
    return e;
  }
  if (auto err = j.find("error"); err != j.end() && !err->is_null()) {
    e.kind = StreamEvent::Kind::kError;
    return e;
  }
  auto bytes_of = [](const nlohmann::json& o, const char* k) -> size_t {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get_ref<const std::string&>().size() : 0;
  };
  e.kind = StreamEvent::Kind::kChunk;
  if (auto c = j.find("choices");
      c != j.end() && c->is_array() && !c->empty() && (*c)[0].is_object()) {
    size_t bytes = bytes_of((*c)[0], "text");
    if (auto d = (*c)[0].find("delta"); d != (*c)[0].end() && d->is_object())
      bytes += bytes_of(*d, "content") + bytes_of(*d, "reasoning_content");
    e.content_deltas = bytes > 0 ? 1 : 0;
    e.content_bytes = bytes;
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    auto n = u->find("completion_tokens");
    if (n != u->end() && n->is_number_unsigned()) {
      e.has_usage = true;
      e.completion_tokens = n->get<uint64_t>();
    } else if (n != u->end() && n->is_number_integer() && n->get<int64_t>() >= 0) {
      e.has_usage = true;
      e.completion_tokens = static_cast<uint64_t>(n->get<int64_t>());
    }
  }
  return e;
}

void ExpectSame(const std::string& s) {
  StreamEvent want = Reference(s);
  StreamEvent got = InterpretEvent(s);
  ASSERT_EQ(static_cast<int>(got.kind), static_cast<int>(want.kind)) << s;
  EXPECT_EQ(got.content_deltas, want.content_deltas) << s;
  EXPECT_EQ(got.content_bytes, want.content_bytes) << s;
  EXPECT_EQ(got.has_usage, want.has_usage) << s;
  EXPECT_EQ(got.completion_tokens, want.completion_tokens) << s;
}

const std::vector<std::string>& Cases() {
  static const std::vector<std::string> cases = {
      R"({"choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null}]})",
      R"({"id":"x","object":"chat.completion.chunk","choices":[{"delta":{"content":"é\n"}}]})",
      R"({"choices":[{"delta":{"content":"\u00e9\ud83d\ude00\n\"\\\/\b\f\r\t"}}]})",
      R"({"choices":[{"text":"\ud83d"}]})",
      R"({"choices":[{"text":"\ude00"}]})",
      R"({"choices":[{"text":"\ud83dx"}]})",
      R"({"choices":[{"text":"\u12G4"}]})",
      R"({"choices":[{"text":"\x"}]})",
      R"({"choices":[],"usage":{"completion_tokens":18446744073709551615}})",
      R"({"choices":[],"usage":{"completion_tokens":18446744073709551616}})",
      R"({"choices":[],"usage":{"completion_tokens":-9223372036854775808}})",
      R"({"choices":[],"usage":{"completion_tokens":-0}})",
      R"({"choices":[],"usage":{"completion_tokens":1e2}})",
      R"({"choices":[],"usage":{"completion_tokens":01}})",
      R"({"choices":[],"usage":{"completion_tokens":1.}})",
      R"({"choices":[],"usage":{"completion_tokens":-}})",
      R"({"choices":[],"usage":{"completion_tokens":2E+3}})",
      R"({"a":1e309,"b":1.7976931348623157e308})",
      R"({"a":1.8e308})",
      R"({"a":-1.8e308})",
      R"({"a":1e-400,"b":0.000e999,"c":0.001e310})",
      R"({"a":123456789012345678901234567890e280})",
      R"({"a":123456789012345678901234567890e270})",
      R"({"ch\u006fices":[{"t\u0065xt":"abc"}],"us\u0061ge":{"completion_tokens":4}})",
      R"( {"choices" : [ { "text" : "a" } ] } )",
      "{\"choices\":[{\"text\":\"a\tb\"}]}",
      "{\"choices\":[{\"text\":\"\xc3\xa9\"}]}",
      "{\"choices\":[{\"text\":\"\xc0\xaf\"}]}",
      "{\"choices\":[{\"text\":\"\xed\xa0\x80\"}]}",
      "{\"choices\":[{\"text\":\"\xf4\x90\x80\x80\"}]}",
      "{\"choices\":[{\"text\":\"\xf0\x9f\x98\x80\"}]}",
      "{\"choices\":[{\"text\":\"\xe0\x80\xaf\"}]}",
      "{\"choices\":[{\"text\":\"\xc3\"}]}",
      R"({"error":null})",
      R"({"error":false})",
      R"({"error":[]})",
      R"({"a":true,"b":false,"c":null,"d":[1,-2,3.5,"x",{}],"e":{}})",
      R"({"a":tru})",
      R"({"a":nul})",
      R"({"a":1,})",
      R"({"a" 1})",
      R"({,"a":1})",
      R"([])",
      R"("text")",
      R"({})",
      R"({}{})",
      "",
      "{",
      R"({"choices":[{"text":"a"}]]})",
  };
  return cases;
}

TEST(ScanJson, AcceptsWhatNlohmannAcceptsOnEdgeCases) {
  for (const auto& s : Cases()) EXPECT_EQ(Scans(s), NlohmannAccepts(s)) << s;
}

TEST(ScanJson, ReadsChunksAsADocumentWouldOnEdgeCases) {
  for (const auto& s : Cases()) ExpectSame(s);
}

TEST(ScanJson, NestingBeyondTheLimitIsRefused) {
  std::string deep = std::string(kMaxJsonDepth, '[') + "1" + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(Scans(deep));
  std::string deeper = "[" + deep + "]";
  EXPECT_FALSE(Scans(deeper));
  EXPECT_FALSE(Scans(std::string(1000000, '[')));
}

/// A random chunk from the shapes servers send, with random content.
std::string RandomChunk(std::mt19937& rng) {
  static const char* kTexts[] = {"tok",          "",     "\\u00e9",  "\\ud83d\\ude00",
                                 "a\\nb",        "\\\"", "\xc3\xa9", "\\/",
                                 "\xe2\x82\xac", " ",    "\\u0000"};
  static const char* kNumbers[] = {"0",    "7",
                                   "-3",   "1.5",
                                   "1e3",  "18446744073709551615",
                                   "-0",   "256",
                                   "2E-2", "99999999999999999999"};
  auto pick = [&](auto& arr) { return arr[rng() % std::size(arr)]; };
  std::string text = std::string("\"") + pick(kTexts) + "\"";
  std::string chunk = "{\"id\":\"cmpl-1\",";
  switch (rng() % 5) {
    case 0:
      chunk += "\"choices\":[{\"index\":0,\"text\":" + text + ",\"finish_reason\":null}]";
      break;
    case 1:
      chunk += "\"choices\":[{\"delta\":{\"content\":" + text + "}}]";
      break;
    case 2:
      chunk += "\"choices\":[{\"delta\":{\"reasoning_content\":" + text + ",\"content\":" + text +
               "}},{\"text\":\"x\"}]";
      break;
    case 3:
      chunk += std::string("\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":") +
               pick(kNumbers) + "}";
      break;
    default:
      chunk += "\"error\":{\"message\":" + text + "}";
      break;
  }
  return chunk + "}";
}

/// `s` with a few random edits: a byte changed, cut, doubled or inserted.
std::string Mutate(std::string s, std::mt19937& rng) {
  static const char kBytes[] = "{}[]\",:\\u0123456789abcdefE+-. \t\n";
  int edits = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < edits && !s.empty(); ++i) {
    size_t at = rng() % s.size();
    char b = rng() % 4 == 0 ? static_cast<char>(rng() % 256) : kBytes[rng() % (sizeof kBytes - 1)];
    switch (rng() % 4) {
      case 0:
        s[at] = b;
        break;
      case 1:
        s.resize(at);
        break;
      case 2:
        s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), b);
        break;
      default:
        s.erase(at, 1);
        break;
    }
  }
  return s;
}

TEST(ScanJson, AgreesWithNlohmannOnGeneratedAndMutatedChunks) {
  std::mt19937 rng(20261202);
  int accepted_mutants = 0;
  for (int i = 0; i < 30000; ++i) {
    std::string chunk = RandomChunk(rng);
    ASSERT_TRUE(NlohmannAccepts(chunk)) << chunk;
    ExpectSame(chunk);
    std::string m = Mutate(chunk, rng);
    bool want = NlohmannAccepts(m);
    ASSERT_EQ(Scans(m), want) << m;
    ExpectSame(m);
    accepted_mutants += want;
    if (HasFailure()) return;
  }
  // The mutations must also make valid JSON at times, or the comparison proves little.
  EXPECT_GT(accepted_mutants, 1000);
}

}  // namespace
}  // namespace berth
