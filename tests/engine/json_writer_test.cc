// core/json_writer.h: the text written as it is made is the text DumpJson(document, 2) gives
// for the same values, hostile strings included.
#include "core/json_writer.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/json_text.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

using nlohmann::ordered_json;

// Every byte from 0 to 255 alone, the escapes JSON names, and strings that are not UTF-8
// (a stray continuation byte, an overlong form, a surrogate, a cut sequence).
std::vector<std::string> HostileStrings() {
  std::vector<std::string> out = {"",
                                  "plain",
                                  "quote \" back \\ slash /",
                                  "tab\tnl\n",
                                  "\x1b[2J",
                                  "caf\xc3\xa9 \xe2\x82\xac",
                                  "\xff",
                                  "a\x80z",
                                  "\xc0\xaf",
                                  "\xed\xa0\x80",
                                  "\xe2\x82",
                                  std::string("nul\0x", 5)};
  for (int c = 0; c < 256; ++c) out.push_back(std::string(1, static_cast<char>(c)));
  return out;
}

TEST(JsonWriterTest, EveryHostileStringIsWrittenAsDumpJsonWritesIt) {
  for (const std::string& s : HostileStrings()) {
    std::string text;
    JsonWriter(&text).Value(s);
    EXPECT_EQ(text, DumpJson(ordered_json(s), 2)) << DumpJson(ordered_json(VisibleBytes(s)));
    std::string keyed;
    JsonWriter w(&keyed);
    w.BeginObject().Field(s, s).EndObject();
    ordered_json doc = ordered_json::object();
    doc[s] = s;
    EXPECT_EQ(keyed, DumpJson(doc, 2));
  }
}

TEST(JsonWriterTest, NumbersNullsAndNestingAreOneDumpsText) {
  std::string text;
  JsonWriter w(&text);
  std::map<int, uint64_t> gpus = {{0, 80ull << 30}, {7, 1}};
  std::map<std::string, std::string> env = {{"A", "x%n"}, {"B", ""}};
  w.BeginObject()
      .Field("int", -42)
      .Field("min", std::numeric_limits<int64_t>::min())
      .Field("max", std::numeric_limits<uint64_t>::max())
      .Field("half", 0.5)
      .Field("whole", 3.0)
      .Field("tiny", 1e-300)
      .Field("true", true)
      .Field("none", nullptr)
      .Field("unset", std::optional<uint64_t>())
      .Field("set", std::optional<uint64_t>(9))
      .Field("gpus", gpus)
      .Field("env", env)
      .Field("empty_list", std::vector<int>())
      .Field("empty_map", std::map<std::string, int>())
      .Field("list", std::vector<std::string>{"a", "\xff"})
      .Field("doc", ordered_json{{"k", {1, 2, ordered_json::object()}}, {"s", "x\ny"}});
  w.Key("nested").BeginArray().BeginArray().EndArray().BeginObject().EndObject();
  w.BeginObject().Field("a", 1).EndObject().EndArray();
  w.EndObject();
  ordered_json doc = {{"int", -42},
                      {"min", std::numeric_limits<int64_t>::min()},
                      {"max", std::numeric_limits<uint64_t>::max()},
                      {"half", 0.5},
                      {"whole", 3.0},
                      {"tiny", 1e-300},
                      {"true", true},
                      {"none", nullptr},
                      {"unset", nullptr},
                      {"set", 9},
                      {"gpus", {{"0", 80ull << 30}, {"7", 1}}},
                      {"env", {{"A", "x%n"}, {"B", ""}}},
                      {"empty_list", ordered_json::array()},
                      {"empty_map", ordered_json::object()},
                      {"list", {"a", "\xff"}},
                      {"doc", {{"k", {1, 2, ordered_json::object()}}, {"s", "x\ny"}}},
                      {"nested", {ordered_json::array(), ordered_json::object(), {{"a", 1}}}}};
  EXPECT_EQ(text, DumpJson(doc, 2));
}

// An array's items made in parts (on other threads, in any order) and joined in order are the
// array one writer makes.
TEST(JsonWriterTest, PartsOfAnArrayJoinedInOrderAreTheWholeArray) {
  auto item = [](JsonWriter& w, int i) {
    w.BeginObject().Field("step", i).Key("tags").BeginArray();
    for (int k = 0; k < i % 3; ++k) w.Value("t" + std::to_string(k));
    w.EndArray().EndObject();
  };
  std::string whole;
  JsonWriter one(&whole);
  one.BeginObject().Key("items").BeginArray();
  for (int i = 0; i < 7; ++i) item(one, i);
  one.EndArray().EndObject();

  std::string head, first, second;
  JsonWriter w(&head);
  w.BeginObject().Key("items").BeginArray();
  JsonWriter b = JsonWriter::InArray(&second, 1, false);
  for (int i = 4; i < 7; ++i) item(b, i);
  JsonWriter a = JsonWriter::InArray(&first, 1, true);
  for (int i = 0; i < 4; ++i) item(a, i);
  w.ItemsWrittenElsewhere(true).EndArray().EndObject();
  EXPECT_EQ(head.substr(0, head.find('[') + 1) + first + second + head.substr(head.find('[') + 1),
            whole);
  ordered_json doc = ordered_json::parse(whole);
  EXPECT_EQ(whole, DumpJson(doc, 2));
  EXPECT_EQ(doc["items"].size(), 7u);
}

}  // namespace
}  // namespace berth
