// Text berth did not write: cutting it on character boundaries, keeping it as JSON can carry it
// (DumpJson never throws), and escaping it for a terminal.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/json_text.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

using json = nlohmann::json;

// "→" is three bytes (e2 86 92), "日" three (e6 97 a5), "é" two (c3 a9), "😀" four.
TEST(Utf8Prefix, ACutNeverEndsInsideACharacter) {
  const std::string text =
      "ab\xe2\x86\x92"
      "cd";
  EXPECT_EQ(Utf8Prefix(text, 2), "ab");
  EXPECT_EQ(Utf8Prefix(text, 3), "ab");
  EXPECT_EQ(Utf8Prefix(text, 4), "ab");
  EXPECT_EQ(Utf8Prefix(text, 5), "ab\xe2\x86\x92");
  EXPECT_EQ(Utf8Prefix(text, 100), text);
  EXPECT_EQ(Utf8Prefix("\xf0\x9f\x98\x80", 3), "");
  EXPECT_EQ(Utf8Prefix("caf\xc3\xa9!", 4), "caf");
  // Every cut of a text of many-byte characters is UTF-8.
  const std::string mixed = "日本 café → 😀 ok";
  for (size_t n = 0; n <= mixed.size(); ++n) {
    std::string_view cut = Utf8Prefix(mixed, n);
    EXPECT_LE(cut.size(), n);
    EXPECT_GE(cut.size() + 3, n);
    EXPECT_TRUE(IsUtf8(cut)) << n;
  }
}

TEST(Utf8Prefix, StrayBytesCountAsOneCharacterEach) {
  EXPECT_EQ(Utf8Prefix("a\x80\x80\x80\x80", 3), "a\x80\x80");
  EXPECT_EQ(Utf8Prefix("\xff\xfe\xfd", 2), "\xff\xfe");
}

TEST(Utf8Suffix, ATailNeverBeginsInsideACharacter) {
  const std::string text =
      "ab\xe2\x86\x92"
      "cd";
  EXPECT_EQ(Utf8Suffix(text, 2), "cd");
  EXPECT_EQ(Utf8Suffix(text, 3), "cd");
  EXPECT_EQ(Utf8Suffix(text, 4), "cd");
  EXPECT_EQ(Utf8Suffix(text, 5),
            "\xe2\x86\x92"
            "cd");
  const std::string mixed = "日本 café → 😀 ok";
  for (size_t n = 0; n <= mixed.size(); ++n) EXPECT_TRUE(IsUtf8(Utf8Suffix(mixed, n))) << n;
}

TEST(VisibleBytes, StrayBytesBecomeHexAndTheRestIsKept) {
  EXPECT_EQ(VisibleBytes("ok \xff caf\xc3\xa9 \xe2\x86"), "ok \\xff caf\xc3\xa9 \\xe2\\x86");
  EXPECT_EQ(VisibleBytes("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(VisibleBytes("\xc0\xaf"), "\\xc0\\xaf");           // an overlong '/'
  EXPECT_EQ(VisibleBytes("a\nb\x1b"), "a\nb\x1b");             // controls are for the printer
  EXPECT_TRUE(IsUtf8(VisibleBytes("\x80\xff\xfe\xc3")));
}

TEST(EscapeLine, NewlinesAndEveryControlAreShownNotObeyed) {
  EXPECT_EQ(EscapeLine("a\nb\tc\r\x1b[2J\x07"), "a\\x0ab\\x09c\\x0d\\x1b[2J\\x07");
  EXPECT_EQ(EscapeLine("\x9b"
                       "2J \xc2\x9b"
                       "2J"),
            "\\x9b2J \\xc2\\x9b2J");
  EXPECT_EQ(EscapeLine("café → 日本"), "café → 日本");
  // Escaping twice changes nothing: what it writes is printable.
  const std::string once = EscapeLine("\x1b]0;x\x07\r\n\xff");
  EXPECT_EQ(EscapeLine(once), once);
  EXPECT_EQ(EscapeControl(once), once);
}

TEST(EscapeControl, TerminalControlsAreShownNotObeyed) {
  EXPECT_EQ(EscapeControl("ExecStart=x\x1b]0;owned\x07\n"), "ExecStart=x\\x1b]0;owned\\x07\n");
  EXPECT_EQ(EscapeControl("a\rb\tc\x7f\n"), "a\\x0db\tc\\x7f\n");
  // C1 CSI, as UTF-8 and as a lone byte; a right-to-left override.
  EXPECT_EQ(EscapeControl("\xc2\x9b"
                          "2J \x9b \xe2\x80\xae"),
            "\\xc2\\x9b2J \\x9b \\xe2\\x80\\xae");
}

TEST(EscapeControl, PrintableUtf8IsKept) {
  EXPECT_EQ(EscapeControl("--port 8000 → 8001, café, 日本\n"), "--port 8000 → 8001, café, 日本\n");
  // A sequence cut short is not UTF-8.
  EXPECT_EQ(EscapeControl("\xe2\x86"), "\\xe2\\x86");
}

TEST(EscapeControl, KeepsLinesButNotCarriageReturns) {
  EXPECT_EQ(EscapeControl("line one\r\nline\ttwo\x1b[2J\n"), "line one\\x0d\nline\ttwo\\x1b[2J\n");
}

TEST(Excerpt, CutOnACharacterBoundaryWithDotsAndOnOneLine) {
  EXPECT_EQ(Excerpt("short", 200), "short");
  EXPECT_EQ(Excerpt("ab\xe2\x86\x92"
                    "cd",
                    4),
            "ab...");
  EXPECT_EQ(Excerpt("a\nb", 200), "a\\x0ab");
  std::string long_text(150, 'x');
  long_text += "日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本日本";
  std::string e = Excerpt(long_text, 200);
  EXPECT_TRUE(IsUtf8(e));
  EXPECT_EQ(e.substr(e.size() - 3), "...");
  EXPECT_LE(e.size(), 203u);
}

// nlohmann's dump() throws type_error.316 on such a string; berth's writer never does.
TEST(DumpJson, AStringThatIsNotUtf8IsWrittenWithItsBytesVisible) {
  json j = {{"detail", "answer: '\xff\xfe'"}, {"ok", "caf\xc3\xa9"}, {"n", 3}};
  EXPECT_THROW((void)j.dump(), json::type_error);
  std::string text;
  ASSERT_NO_THROW(text = DumpJson(j));
  EXPECT_EQ(text, R"({"detail":"answer: '\\xff\\xfe'","n":3,"ok":"café"})");
  json back = json::parse(text);
  EXPECT_EQ(back["detail"], "answer: '\\xff\\xfe'");
}

TEST(DumpJson, KeysArraysAndNestingAreCleanedToo) {
  json j = {{"units", {{"a\x80.service", {{"log", json::array({"ok", "cut \xe6\x97"})}}}}}};
  std::string text = DumpJson(j, 2);
  json back = json::parse(text);
  EXPECT_EQ(back["units"]["a\\x80.service"]["log"][1], "cut \\xe6\\x97");
  EXPECT_EQ(back["units"]["a\\x80.service"]["log"][0], "ok");
}

TEST(DumpJson, AValidDocumentIsWrittenAsDumpWritesIt) {
  json j = {
      {"a", "日本 → \x1b"}, {"b", json::array({1, 2.5, true, nullptr})}, {"c", json::object()}};
  EXPECT_EQ(DumpJson(j), j.dump());
  EXPECT_EQ(DumpJson(j, 2), j.dump(2));
}

// state.json, saved plans and the store's records keep their keys in the order berth wrote them.
TEST(DumpJson, AnOrderedDocumentKeepsItsOrderCleanOrNot) {
  nlohmann::ordered_json j;
  j["zeta"] = 1;
  j["alpha"] = "ok";
  EXPECT_EQ(DumpJson(j), R"({"zeta":1,"alpha":"ok"})");
  j["mid"] = "bad \xff";
  EXPECT_EQ(DumpJson(j), R"({"zeta":1,"alpha":"ok","mid":"bad \\xff"})");
}

}  // namespace
}  // namespace berth
