#include "manifests/did_you_mean.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace berth::manifests {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.substr(0, prefix.size()) == prefix;
}

}  // namespace

size_t EditDistance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic-programming table are enough for transpositions.
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], before[j - 2] + 1);
      }
    }
    before.swap(prev);
    prev.swap(cur);
  }
  return prev[b.size()];
}

std::string ClosestMatch(std::string_view word, std::span<const std::string_view> candidates) {
  if (word.empty()) return "";
  const std::string lower = Lower(word);
  for (std::string_view c : candidates) {
    if (Lower(c) == lower) return std::string(c);
  }
  // Typos first: a prefix match on a short word ("p" -> "port") is a weaker signal.
  const size_t limit = std::min<size_t>(3, std::max<size_t>(1, word.size() / 2));
  std::string best;
  size_t best_distance = limit + 1;
  for (std::string_view c : candidates) {
    size_t d = EditDistance(lower, Lower(c));
    if (d < best_distance) {
      best = std::string(c);
      best_distance = d;
    }
  }
  if (!best.empty()) return best;
  if (word.size() >= 2) {
    for (std::string_view c : candidates) {
      const std::string lc = Lower(c);
      if (StartsWith(lc, lower) || StartsWith(lower, lc)) return std::string(c);
    }
  }
  return "";
}

std::string DidYouMean(std::string_view word, std::span<const std::string_view> candidates) {
  std::string match = ClosestMatch(word, candidates);
  return match.empty() ? "" : "did you mean '" + match + "'?";
}

}  // namespace berth::manifests
