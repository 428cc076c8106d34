#include "core/unified_diff.h"

#include <algorithm>
#include <vector>

namespace berth {
namespace {

// Each line keeps its '\n'; a last line without one differs from the same line with one.
std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    size_t end = eol == std::string_view::npos ? text.size() : eol + 1;
    lines.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return lines;
}

size_t CountLines(std::string_view text) {
  size_t n = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  return n + (!text.empty() && text.back() != '\n' ? 1 : 0);
}

enum class Op : char { kEqual = ' ', kDelete = '-', kInsert = '+' };

struct Edit {
  Op op;
  size_t old_at;  // lines of the old text before this one
  size_t new_at;  // lines of the new text before this one
};

// Above this many cells the middle of two texts is replaced whole: a correct diff, not the
// shortest one (16 MB of table at most).
constexpr size_t kMaxTableCells = 4'000'000;

// The edit script of `a` into `b`: common prefix and suffix, and a longest common subsequence
// of what lies between them (deletions before insertions in each changed run).
std::vector<Edit> EditScript(const std::vector<std::string_view>& a,
                             const std::vector<std::string_view>& b) {
  size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix])
    ++suffix;
  const size_t n = a.size() - prefix - suffix, m = b.size() - prefix - suffix;

  std::vector<Edit> edits;
  size_t i = 0, j = 0;  // positions in a and b
  auto push = [&](Op op) {
    edits.push_back({op, i, j});
    if (op != Op::kInsert) ++i;
    if (op != Op::kDelete) ++j;
  };
  for (size_t k = 0; k < prefix; ++k) push(Op::kEqual);
  if ((n + 1) * (m + 1) > kMaxTableCells) {
    for (size_t k = 0; k < n; ++k) push(Op::kDelete);
    for (size_t k = 0; k < m; ++k) push(Op::kInsert);
  } else {
    // lcs[x * (m + 1) + y]: the longest common subsequence of a[prefix + x ..] and
    // b[prefix + y ..] within the middle.
    std::vector<uint32_t> lcs((n + 1) * (m + 1), 0);
    auto at = [&](size_t x, size_t y) -> uint32_t& { return lcs[x * (m + 1) + y]; };
    for (size_t x = n; x-- > 0;)
      for (size_t y = m; y-- > 0;)
        at(x, y) = a[prefix + x] == b[prefix + y] ? at(x + 1, y + 1) + 1
                                                  : std::max(at(x + 1, y), at(x, y + 1));
    size_t x = 0, y = 0;
    while (x < n || y < m) {
      if (x < n && y < m && a[prefix + x] == b[prefix + y]) {
        push(Op::kEqual);
        ++x, ++y;
      } else if (y == m || (x < n && at(x + 1, y) >= at(x, y + 1))) {
        push(Op::kDelete);
        ++x;
      } else {
        push(Op::kInsert);
        ++y;
      }
    }
  }
  for (size_t k = 0; k < suffix; ++k) push(Op::kEqual);
  return edits;
}

// "-l,n" as diff -u writes it: the count is left out when it is 1; an empty range names the
// line before it.
std::string Range(char sign, size_t start, size_t count) {
  std::string s(1, sign);
  s += std::to_string(count == 0 ? start : start + 1);
  // Appended, not s += "," + std::to_string(...): g++ 12 -O3 warns falsely on the temporary
  // (-Wrestrict, GCC bug 105329).
  if (count != 1) s.append(",").append(std::to_string(count));
  return s;
}

void AppendHunk(const std::vector<Edit>& edits, size_t from, size_t to,
                const std::vector<std::string_view>& a, const std::vector<std::string_view>& b,
                std::string* out) {
  size_t old_count = 0, new_count = 0;
  for (size_t k = from; k < to; ++k) {
    if (edits[k].op != Op::kInsert) ++old_count;
    if (edits[k].op != Op::kDelete) ++new_count;
  }
  *out += "@@ " + Range('-', edits[from].old_at, old_count) + " " +
          Range('+', edits[from].new_at, new_count) + " @@\n";
  for (size_t k = from; k < to; ++k) {
    const Edit& e = edits[k];
    std::string_view line = e.op == Op::kInsert ? b[e.new_at] : a[e.old_at];
    out->push_back(static_cast<char>(e.op));
    if (!line.empty() && line.back() == '\n') {
      out->append(line);
    } else {
      out->append(line);
      *out += "\n\\ No newline at end of file\n";
    }
  }
}

}  // namespace

std::string UnifiedDiff(std::string_view old_text, std::string_view new_text,
                        std::string_view old_label, std::string_view new_label,
                        const UnifiedDiffOptions& options) {
  if (old_text == new_text) return "";
  if (old_text.size() > options.max_bytes || new_text.size() > options.max_bytes ||
      CountLines(old_text) + CountLines(new_text) > options.max_lines)
    return "(diff too large: " + std::to_string(CountLines(old_text) + CountLines(new_text)) +
           " lines)\n";
  std::vector<std::string_view> a = SplitLines(old_text), b = SplitLines(new_text);
  std::vector<Edit> edits = EditScript(a, b);
  const size_t context = static_cast<size_t>(std::max(options.context, 0));

  std::string out = "--- " + std::string(old_label) + "\n+++ " + std::string(new_label) + "\n";
  size_t i = 0;
  while (i < edits.size()) {
    while (i < edits.size() && edits[i].op == Op::kEqual) ++i;
    if (i == edits.size()) break;
    size_t from = i >= context ? i - context : 0;
    size_t j = i;
    for (;;) {
      while (j < edits.size() && edits[j].op != Op::kEqual) ++j;
      size_t next = j;
      while (next < edits.size() && edits[next].op == Op::kEqual) ++next;
      // The next change shares this hunk when their contexts touch.
      if (next < edits.size() && next - j <= 2 * context) {
        j = next;
        continue;
      }
      break;
    }
    size_t to = std::min(edits.size(), j + context);
    AppendHunk(edits, from, to, a, b, &out);
    i = to;
  }
  return out;
}

}  // namespace berth
