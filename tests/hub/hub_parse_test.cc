// The Hub's answers parsed as data: every hostile value is an error that names the field, never
// an exception, never a path.
#include "providers/hub/hub_parse.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace berth {
namespace {

using ::testing::HasSubstr;

const std::string kSha1 = "3914be8a017af6f2a58402c37134858a1cce9b22";
const std::string kSha256 = "6edf90530215a4eb6e9e91e32d961c38e962bb2e4226dd4d1370b0e20822fdb0";

TEST(HubParseTest, RevisionInfoGivesTheCommitOrSaysWhy) {
  auto ok = ParseRevisionInfo(R"({"sha": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1"})");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1");
  for (const char* body : {"", "[]", "{", R"({"sha": 5})", R"({"sha": "../../x"})", "{}",
                           R"({"sha": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA1"})"})
    EXPECT_FALSE(ParseRevisionInfo(body).ok()) << body;
}

TEST(HubParseTest, ATreePageKeepsFilesWithValidatedNames) {
  std::vector<HubFileEntry> out;
  std::string page = R"([{"type": "directory", "oid": "x", "size": 0, "path": "sub"},
    {"type": "file", "oid": ")" +
                     kSha1 + R"(", "size": 23, "path": "sub/config.json"},
    {"type": "file", "oid": ")" +
                     kSha1 + R"(", "size": 300000, "path": "model.safetensors",
     "lfs": {"oid": ")" +
                     kSha256 + R"(", "size": 300000, "pointerSize": 131}}])";
  ASSERT_TRUE(ParseTreePage(page, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].etag(), kSha1);
  EXPECT_EQ(out[1].etag(), kSha256);
}

TEST(HubParseTest, ATreePageWithAHostileValueIsRefusedWhole) {
  auto entry = [](const std::string& fields) { return "[{\"type\": \"file\", " + fields + "}]"; };
  const std::string path = R"("path": "config.json")";
  struct Case {
    std::string body, says;
  } cases[] = {
      {entry(path + R"(, "size": 1, "oid": "../../../x")"), "oid"},
      {entry(path + R"(, "size": 1, "oid": ")" + kSha256 + "\""), "git blob sha1"},
      {entry(path + R"(, "size": 1, "oid": ")" + kSha1 + R"(", "lfs": {"oid": ")" + kSha1 + "\"}"),
       "lfs.oid"},
      {entry(path + R"(, "size": 1, "oid": ")" + kSha1 + R"(", "lfs": "x")"), "lfs"},
      {entry(path + R"(, "size": 9223372036854775808, "oid": ")" + kSha1 + "\""), "2^50"},
      {entry(path + R"(, "size": 1e22, "oid": ")" + kSha1 + "\""), "size"},
      {entry(path + R"(, "size": -1, "oid": ")" + kSha1 + "\""), "size"},
      {entry(path + R"(, "oid": ")" + kSha1 + "\""), "size"},
      {entry(R"("path": "../x", "size": 1, "oid": ")" + kSha1 + "\""), "unsafe file path"},
      {entry(R"("path": "a//b", "size": 1, "oid": ")" + kSha1 + "\""), "unsafe file path"},
      {entry(R"("path": "a\\b", "size": 1, "oid": ")" + kSha1 + "\""), "unsafe file path"},
      {entry(R"("path": 7, "size": 1, "oid": ")" + kSha1 + "\""), "no path"},
      {"[1]", "not an object"},
      {"{}", "not a JSON list"},
      {"[", "not a JSON list"},
  };
  for (const auto& c : cases) {
    std::vector<HubFileEntry> out;
    Status s = ParseTreePage(c.body, &out);
    ASSERT_FALSE(s.ok()) << c.body;
    EXPECT_THAT(s.message(), HasSubstr(c.says)) << c.body;
    EXPECT_TRUE(out.empty());
  }
}

TEST(HubParseTest, LinkNextAndSizesAndEtags) {
  EXPECT_EQ(ParseLinkNext(R"(<https://h/x?cursor=a>; rel="next")"), "https://h/x?cursor=a");
  EXPECT_EQ(ParseLinkNext(R"(<https://h/p>; rel="prev", <https://h/n>; rel="next")"),
            "https://h/n");
  EXPECT_EQ(ParseLinkNext(R"(rel="next")"), "");
  EXPECT_EQ(ParseLinkNext(R"(> rel="next")"), "");
  EXPECT_EQ(ParseLinkNext(""), "");
  EXPECT_EQ(*ParseSizeHeader("300000"), 300000u);
  for (const char* bad :
       {"", "abc", "-1", "1e9", " 5", "12345678901234567890123", "1125899906842625"})  // 2^50 + 1
    EXPECT_FALSE(ParseSizeHeader(bad).ok()) << bad;
  EXPECT_EQ(NormalizeEtag("W/\"abc\""), "abc");
  EXPECT_EQ(NormalizeEtag("\"abc\""), "abc");
  EXPECT_EQ(NormalizeEtag("\""), "");
}

}  // namespace
}  // namespace berth
