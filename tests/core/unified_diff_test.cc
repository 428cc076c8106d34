// The unified diff a reviewer reads under a write-unit step.
#include "core/unified_diff.h"

#include <gtest/gtest.h>

#include <charconv>
#include <random>
#include <string>
#include <vector>

namespace berth {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    size_t end = eol == std::string::npos ? text.size() : eol + 1;
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

size_t Number(const std::string& s, size_t at) {
  size_t v = 0;
  std::from_chars(s.data() + at, s.data() + s.size(), v);
  return v;
}

// What `patch` would do: applies the hunks of `diff` to `old_text`, checking every context and
// removed line against it. Fails the test (and returns "") on a hunk that does not apply.
std::string ApplyPatch(const std::string& old_text, const std::string& diff) {
  std::vector<std::string> old_lines = Lines(old_text), d = Lines(diff);
  std::string out;
  size_t at = 0;  // old lines copied or consumed
  size_t k = 2;   // past the --- and +++ headers
  EXPECT_GE(d.size(), 3u);
  while (k < d.size()) {
    const std::string& h = d[k];
    EXPECT_EQ(h.rfind("@@ -", 0), 0u) << h;
    if (h.rfind("@@ -", 0) != 0) return "";
    size_t start = Number(h, 4);
    size_t comma = h.find(',', 4), space = h.find(' ', 4);
    size_t count = comma < space ? Number(h, comma + 1) : 1;
    size_t first = count == 0 ? start : start - 1;  // 0-based index of the hunk's first old line
    EXPECT_GE(first, at) << "hunks overlap or go backwards: " << h;
    while (at < first) out += old_lines[at++];
    ++k;
    while (k < d.size() && d[k].rfind("@@", 0) != 0) {
      std::string line = d[k].substr(1);
      // "\ No newline at end of file" takes the newline off the line before it.
      bool cut = k + 1 < d.size() && d[k + 1] == "\\ No newline at end of file\n";
      if (cut) line.pop_back();
      if (d[k][0] == ' ' || d[k][0] == '-') {
        EXPECT_LT(at, old_lines.size());
        if (at >= old_lines.size()) return "";
        EXPECT_EQ(old_lines[at], line) << "at old line " << at + 1;
        ++at;
      }
      if (d[k][0] == ' ' || d[k][0] == '+') out += line;
      k += cut ? 2 : 1;
    }
  }
  while (at < old_lines.size()) out += old_lines[at++];
  return out;
}

TEST(UnifiedDiff, EqualTextsHaveNoDiff) {
  EXPECT_EQ(UnifiedDiff("a\nb\n", "a\nb\n", "a/x", "b/x"), "");
  EXPECT_EQ(UnifiedDiff("", "", "a/x", "b/x"), "");
}

TEST(UnifiedDiff, ANewFileIsAllAdded) {
  EXPECT_EQ(UnifiedDiff("", "[Unit]\nDescription=x\n", "/dev/null", "b/x.service"),
            "--- /dev/null\n+++ b/x.service\n@@ -0,0 +1,2 @@\n+[Unit]\n+Description=x\n");
}

TEST(UnifiedDiff, AChangedLineHasThreeLinesOfContextEachSide) {
  std::string old_text = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
  std::string new_text = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
  EXPECT_EQ(UnifiedDiff(old_text, new_text, "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
}

TEST(UnifiedDiff, ACountOfOneIsLeftOutAsDiffDoes) {
  EXPECT_EQ(UnifiedDiff("a\n", "b\n", "a/f", "b/f"), "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n");
}

TEST(UnifiedDiff, DistantChangesAreSeparateHunksCloseOnesShareOne) {
  std::string old_text;
  for (int i = 1; i <= 20; ++i) old_text += std::to_string(i) + "\n";
  std::string far = old_text, near = old_text;
  far.replace(far.find("2\n"), 2, "two\n");
  far.replace(far.find("19\n"), 3, "nineteen\n");
  std::string d = UnifiedDiff(old_text, far, "a/f", "b/f");
  EXPECT_NE(d.find("@@ -1,5 +1,5 @@"), std::string::npos) << d;
  EXPECT_NE(d.find("@@ -16,5 +16,5 @@"), std::string::npos) << d;
  // Six unchanged lines between two changes: their contexts touch, one hunk.
  near.replace(near.find("3\n"), 2, "three\n");
  near.replace(near.find("10\n"), 3, "ten\n");
  d = UnifiedDiff(old_text, near, "a/f", "b/f");
  EXPECT_EQ(std::count(d.begin(), d.end(), '@'), 4) << d;
  EXPECT_NE(d.find("@@ -1,13 +1,13 @@"), std::string::npos) << d;
}

TEST(UnifiedDiff, ALastLineWithoutNewlineIsMarked) {
  EXPECT_EQ(UnifiedDiff("a\nb", "a\nb\n", "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n");
  EXPECT_EQ(UnifiedDiff("a\n", "a\nc", "a/f", "b/f"),
            "--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n a\n+c\n\\ No newline at end of file\n");
}

TEST(UnifiedDiff, EverythingRemovedLeavesAnEmptyRange) {
  EXPECT_EQ(UnifiedDiff("a\nb\n", "", "a/f", "b/f"), "--- a/f\n+++ b/f\n@@ -1,2 +0,0 @@\n-a\n-b\n");
}

TEST(UnifiedDiff, TooLargeInputsGiveANoteNotADiff) {
  std::string big;
  for (int i = 0; i < 3000; ++i) big += "line " + std::to_string(i) + "\n";
  EXPECT_EQ(UnifiedDiff(big, big + big, "a/f", "b/f"), "(diff too large: 9000 lines)\n");
  UnifiedDiffOptions small;
  small.max_bytes = 10;
  EXPECT_EQ(UnifiedDiff("0123456789ab\n", "x\n", "a/f", "b/f", small),
            "(diff too large: 2 lines)\n");
}

// Property: on random texts over a small alphabet of lines (so that many lines repeat), the
// hunks apply to the old text and give the new one, with or without a last newline.
TEST(UnifiedDiff, HunksAppliedToTheOldTextGiveTheNewText) {
  std::mt19937 rng(20261201);
  const std::vector<std::string> alphabet = {"[Service]", "ExecStart=/bin/x", "",         "a",
                                             "b",         "Restart=always",   "# comment"};
  auto random_text = [&] {
    std::string t;
    int n = static_cast<int>(rng() % 25);
    for (int i = 0; i < n; ++i) t += alphabet[rng() % alphabet.size()] + "\n";
    if (!t.empty() && rng() % 4 == 0) t.pop_back();  // no newline at the end
    return t;
  };
  for (int round = 0; round < 2000; ++round) {
    std::string a = random_text(), b = rng() % 3 == 0 ? random_text() : a;
    if (rng() % 3 != 0) {
      // A few edits of `a`, like a hand edit: the common case.
      std::vector<std::string> lines = Lines(b);
      for (int e = static_cast<int>(rng() % 4); e > 0; --e) {
        size_t at = lines.empty() ? 0 : rng() % (lines.size() + 1);
        if (rng() % 2 && at < lines.size())
          lines.erase(lines.begin() + static_cast<long>(at));
        else
          lines.insert(lines.begin() + static_cast<long>(at),
                       alphabet[rng() % alphabet.size()] + "\n");
      }
      b.clear();
      for (const auto& l : lines) b += l;
    }
    std::string d = UnifiedDiff(a, b, "a/f", "b/f");
    if (a == b) {
      EXPECT_EQ(d, "");
      continue;
    }
    ASSERT_EQ(ApplyPatch(a, d), b) << "old:\n" << a << "\nnew:\n" << b << "\ndiff:\n" << d;
  }
}

// Past the table's size the changed middle is replaced whole: longer, still correct.
TEST(UnifiedDiff, TwoLongDifferentTextsStillGiveADiffThatApplies) {
  std::string a = "[Unit]\n", b = "[Unit]\n";
  for (int i = 0; i < 2400; ++i) {
    a += "old " + std::to_string(i) + "\n";
    b += "new " + std::to_string(i % 7) + "\n";
  }
  a += "[Install]\n";
  b += "[Install]\n";
  std::string d = UnifiedDiff(a, b, "a/f", "b/f");
  EXPECT_NE(d.find("@@ -1,2402 +1,2402 @@"), std::string::npos) << d.substr(0, 200);
  EXPECT_EQ(ApplyPatch(a, d), b);
}

}  // namespace
}  // namespace berth
