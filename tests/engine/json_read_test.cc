// The fast JSON reader against nlohmann's parser: whatever the fast reader reads, it reads to
// the same document (types included: int64, uint64, double); whatever nlohmann refuses, the fast
// reader leaves to it. On every JSON file in the repository, written cases and seeded mutations.
#include "core/json_read.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tests/support/repository_files.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::FileText;
using testing::RepositoryFiles;

// Equal values of equal types, all the way down (json's == calls 1 and 1u and 1.0 equal).
bool Same(const json& a, const json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
      if (ia.key() != ib.key() || !Same(*ia, *ib)) return false;
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!Same(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

// Fails when the fast reader took `text` and nlohmann refuses it or reads something else.
void ExpectAgreement(const std::string& text, const std::string& what, bool* taken = nullptr) {
  std::optional<json> fast = ReadJsonFast(text);
  if (taken) *taken = fast.has_value();
  if (!fast) return;
  json full;
  try {
    full = json::parse(text);
  } catch (const json::exception& e) {
    ADD_FAILURE() << what << ": the fast reader took text nlohmann refuses (" << e.what() << "):\n"
                  << text.substr(0, 2000);
    return;
  }
  EXPECT_TRUE(Same(*fast, full)) << what << ":\n" << text.substr(0, 2000);
}

TEST(JsonReadTest, EveryJsonFileInTheRepositoryReadsAsNlohmannReadsIt) {
  std::vector<fs::path> files = RepositoryFiles({".json"});
  ASSERT_GT(files.size(), 10u);
  size_t taken_count = 0;
  for (const fs::path& p : files) {
    bool taken = false;
    ExpectAgreement(FileText(p), p.string(), &taken);
    taken_count += taken ? 1 : 0;
  }
  EXPECT_GT(taken_count * 10, files.size() * 7) << taken_count << " of " << files.size();
}

TEST(JsonReadTest, WrittenCasesReadAsNlohmannReadsThem) {
  const std::vector<std::pair<std::string, bool>> cases = {
      {"{}", true},
      {" [ ] ", true},
      {"{\"a\": 1, \"b\": -1, \"c\": 1.5, \"d\": 1e3, \"e\": -0, \"f\": 0.0}", true},
      {"[18446744073709551615, -9223372036854775808, 2.5E-3, 1E+2]", true},
      {"[true, false, null, \"\"]", true},
      {"\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0041\\u0000\"", true},
      {"{\"k\": 1, \"k\": 2}", true},
      {"{\"b\": {\"c\": [1, {\"d\": []}]}, \"a\": \"x\"}", true},
      {"17", true},
      {"[18446744073709551616]", true},
      {"[-9223372036854775809]", true},
      {"[1e400]", false},
      {"[1e-400, -1e-400, 4.9e-324]", true},
      {"\"\\ud83d\"", false},
      {"\"\xff\"", false},
      {"\"caf\xc3\xa9\"", true},
      {"\"\\u00e9\"", true},
      {"\"\\ud83d\\ude00\"", true},
      {"\"a\tb\"", false},
      {"", false},
      {"{", false},
      {"[1,]", false},
      {"{\"a\" 1}", false},
      {"{\"a\": 1,}", false},
      {"[01]", false},
      {"[1.]", false},
      {"[.5]", false},
      {"[+1]", false},
      {"[1e]", false},
      {"[tru]", false},
      {"[nul]", false},
      {"{} x", false},
      {"\xef\xbb\xbf{}", false},
      {"[\"\\x\"]", false},
      {"[\"\\u12\"]", false},
      {"{'a': 1}", false},
  };
  for (const auto& [text, fast] : cases) {
    EXPECT_EQ(ReadJsonFast(text).has_value(), fast) << text;
    ExpectAgreement(text, "written case");
  }
}

TEST(JsonReadTest, DeepNestingIsLeftToNlohmann) {
  EXPECT_FALSE(ReadJsonFast(std::string(100000, '[') + std::string(100000, ']')).has_value());
  EXPECT_TRUE(ReadJsonFast(std::string(500, '[') + std::string(500, ']')).has_value());
}

// Seeded mutations of berth's own observations and plans: a byte deleted, one of JSON's
// characters inserted, a span repeated. Each mutant the fast reader takes must read as nlohmann
// reads it.
TEST(JsonReadTest, MutationsOfBerthsDocumentsReadAsNlohmannReadsThem) {
  std::vector<std::string> seeds;
  for (const fs::path& p : RepositoryFiles({".json"})) {
    std::string text = FileText(p);
    if (text.size() < 200000) seeds.push_back(text);
  }
  ASSERT_FALSE(seeds.empty());
  const std::string inserts = "{}[]:,\"\\ 0-1.eE+tfnu\n";
  std::mt19937 rng(20261203);
  size_t taken = 0, left = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = seeds[rng() % seeds.size()];
    if (text.empty()) continue;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text.erase(at, 1);
          break;
        case 1:
          text.insert(at, 1, inserts[rng() % inserts.size()]);
          break;
        default:
          text.insert(at, text.substr(at, rng() % 16));
          break;
      }
    }
    bool was_taken = false;
    ExpectAgreement(text, "mutant " + std::to_string(i), &was_taken);
    (was_taken ? taken : left) += 1;
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(taken, 300u);
  EXPECT_GT(left, 300u);
}

}  // namespace
}  // namespace berth
