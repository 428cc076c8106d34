// The block reader against yaml-cpp: whatever the block reader reads, it reads to the same tree
// (types, texts, tags, positions) as yaml-cpp; whatever yaml-cpp refuses, the block reader leaves
// to it. Checked on every YAML file in the repository, on cases written for each rule, and on
// thousands of seeded mutations of the example manifests.
#include "manifests/yaml_block.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "manifests/yaml_parse.h"
#include "manifests/yaml_reader.h"
#include "manifests/yaml_tree.h"
#include "tests/support/repository_files.h"

namespace berth::manifests {
namespace {

namespace fs = std::filesystem;
using testing::FileText;
using testing::RepositoryFiles;

struct Outcome {
  bool block_read = false;   // the block reader took it
  bool yaml_cpp_ok = false;  // yaml-cpp read it without a diagnostic
  std::string difference;    // where the two trees differ; "" when they agree
};

Outcome Compare(const std::string& text) {
  Outcome o;
  YamlDocument block;
  o.block_read = ReadBlockYaml(text, &block);
  std::vector<Diagnostic> diagnostics;
  YamlReader r("t.yaml", &diagnostics);
  std::optional<YamlDocument> full = ParseWithYamlCpp(r, text);
  o.yaml_cpp_ok = full.has_value() && diagnostics.empty();
  if (o.block_read && o.yaml_cpp_ok && !SameTree(block.root(), full->root(), &o.difference) &&
      o.difference.empty())
    o.difference = "differ";
  return o;
}

// Fails the test when the block reader took `text` and either yaml-cpp refused it or read
// something else.
void ExpectAgreement(const std::string& text, const std::string& what) {
  Outcome o = Compare(text);
  if (!o.block_read) return;
  EXPECT_TRUE(o.yaml_cpp_ok) << what << ": the block reader took text yaml-cpp refuses:\n" << text;
  EXPECT_EQ(o.difference, "") << what << ": the trees differ:\n" << text;
}

TEST(YamlBlockTest, EveryYamlFileInTheRepositoryReadsAsYamlCppReadsIt) {
  std::vector<fs::path> files = RepositoryFiles({".yaml", ".yml"});
  ASSERT_GT(files.size(), 20u);
  size_t taken = 0;
  for (const fs::path& p : files) {
    std::string text = FileText(p);
    Outcome o = Compare(text);
    if (o.block_read) {
      ++taken;
      EXPECT_TRUE(o.yaml_cpp_ok) << p;
      EXPECT_EQ(o.difference, "") << p;
    }
  }
  // Most of them are plain block YAML: the fast path is the one manifests take.
  EXPECT_GT(taken * 10, files.size() * 7) << taken << " of " << files.size();
}

TEST(YamlBlockTest, TheExampleManifestsTakeTheBlockReader) {
  for (const char* example : {"single-gpu", "blackwell-8x"}) {
    fs::path dir = fs::path(BERTH_SOURCE_DIR) / "manifests" / "examples" / example;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".yaml") continue;
      YamlDocument doc;
      EXPECT_TRUE(ReadBlockYaml(FileText(entry.path()), &doc)) << entry.path();
    }
  }
}

TEST(YamlBlockTest, WrittenCasesReadAsYamlCppReadsThem) {
  // Each is read by the block reader (true) or left to yaml-cpp (false); either way the two agree.
  const std::vector<std::pair<std::string, bool>> cases = {
      {"", true},
      {"# only a comment\n\n", true},
      {"a: 1\n", true},
      {"a: 1\nb:\n  c: [x, 'y', \"z\"]\n  d: {p: 1, q: two}\n", true},
      {"a:\n- x\n- y\nb: 2\n", true},
      {"a:\n  - x\n  -   y  # c\n", true},
      {"- a: 1\n  b: 2\n- c: 3\n", true},
      {"-   a: 1\n    b:\n      - z\n", true},
      {"a: hf://org/m:latest\nb: x#y\nc: 'it''s'\nd: \"q\\\"\\\\\\n\\t/\"\n", true},
      {"a: null\nb: ~\nc: Null\nd:\ne: 'null'\nf: NULL\n", true},
      {"a: [null, ~, '', \"\"]\n", true},
      {"a: []\nb: {}\nc: [[1, 2], {x: [3]}]\n", true},
      {"a  : 1\n'b c': 2\n\"d\": 3\n", true},
      {"a: -1\nb: --flag\nc: a,b\nd: x [y] {z}\n", true},
      {"a: {k: hf://o/m, n: v}\n", true},
      {"a: 1 # c\n  # deeper comment\nb: 2\n", true},
      {"a:\n\n  b: 1\n\n  c: 2\n", true},
      {"k:\n- a: 1\n  b: 2\n- c\n", true},
      {"- a\n- - b\n", false},
      {"a: |\n  x\n", false},
      {"a: >\n  x\n", false},
      {"a: &x 1\nb: *x\n", false},
      {"a: !!str 1\n", false},
      {"a: b: c\n", false},
      {"a: x\n  y\n", false},
      {"a:\n\tb: 1\n", false},
      {"a: 'x\n  y'\n", false},
      {"a: [x,\n  y]\n", true},
      {"a: {p: 1,  # c\n\n     q: [2,\n  3]}  # d\nb: 1\n", true},
      {"- [x,\n   y]\n- z\n", true},
      {"a: [x,\ny]\n", false},
      {"a: [x\n  , y]\n", false},
      {"a: [x, 'y\n  z']\n", false},
      {"a: [x,\n  y]\n  b: 1\n", false},
      {"a: [x, y,]\n", false},
      {"a: [x: y]\n", false},
      {"--- \na: 1\n", false},
      {"a: 1\n---\nb: 2\n", false},
      {"? a\n: b\n", false},
      {"a: \"\\u00e9\"\n", false},
      {"a: caf\xc3\xa9\n", false},
      {"'caf\xc3\xa9': 1\n", false},
      {"# an 8 \xc3\x97 96 GiB host\na: 1  # \xe2\x80\x94 x\n", true},
      {"a: 1 # \xff\xfe\n", true},
      {"a: 1\r\nb: 2\r\n", false},
      {"a: 1\n b: 2\n", false},
      {"  a: 1\nb: 2\n", false},
      {"a:\n  - x\n  y: 1\n", false},
      {"a: 1\n- b\n", false},
      {",]", false},
      {"x\n", false},
      {"-\n  a: 1\n", false},
      {"a: 'x'y\n", false},
      {"a: [x]#c\n", false},
      {"a: {b:c}\n", false},
      {"[a]: 1\n", false},
      {"a: @x\n", false},
      {"a: `x`\n", false},
  };
  for (const auto& [text, block] : cases) {
    YamlDocument doc;
    EXPECT_EQ(ReadBlockYaml(text, &doc), block) << text;
    ExpectAgreement(text, "written case");
  }
}

TEST(YamlBlockTest, DeepNestingIsLeftToYamlCpp) {
  YamlDocument doc;
  EXPECT_FALSE(ReadBlockYaml("a: " + std::string(5000, '[') + std::string(5000, ']') + "\n", &doc));
  std::string deep;
  for (int i = 0; i < 200; ++i) deep += std::string(static_cast<size_t>(2 * i), ' ') + "k:\n";
  EXPECT_FALSE(ReadBlockYaml(deep, &doc));
}

// Seeded mutations of the examples: a character deleted, one of YAML's indicators inserted, a
// line repeated or indented. Each mutant the block reader takes must read as yaml-cpp reads it.
TEST(YamlBlockTest, MutationsOfTheExamplesReadAsYamlCppReadsThem) {
  std::vector<std::string> seeds;
  for (const fs::path& p : RepositoryFiles({".yaml", ".yml"})) {
    if (p.string().find("/manifests/examples/") != std::string::npos) seeds.push_back(FileText(p));
  }
  ASSERT_FALSE(seeds.empty());
  const std::string inserts = ":- #'\"[]{},\n&*!|>?~.0x";
  std::mt19937 rng(20261203);
  size_t taken = 0, left = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = seeds[rng() % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !text.empty(); ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 4) {
        case 0:
          text.erase(at, 1);
          break;
        case 1:
          text.insert(at, 1, inserts[rng() % inserts.size()]);
          break;
        case 2: {
          size_t start = text.rfind('\n', at);
          start = start == std::string::npos ? 0 : start + 1;
          text.insert(start, "  ");
          break;
        }
        default: {
          size_t start = text.rfind('\n', at);
          start = start == std::string::npos ? 0 : start + 1;
          size_t end = text.find('\n', at);
          if (end == std::string::npos) break;
          text.insert(start, text.substr(start, end + 1 - start));
          break;
        }
      }
    }
    Outcome o = Compare(text);
    (o.block_read ? taken : left) += 1;
    if (o.block_read) {
      ASSERT_TRUE(o.yaml_cpp_ok) << "mutant " << i << ": the block reader took text yaml-cpp "
                                 << "refuses:\n"
                                 << text;
      ASSERT_EQ(o.difference, "") << "mutant " << i << ":\n" << text;
    }
  }
  // Both paths were exercised.
  EXPECT_GT(taken, 500u);
  EXPECT_GT(left, 500u);
}

}  // namespace
}  // namespace berth::manifests
