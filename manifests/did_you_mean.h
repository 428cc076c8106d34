// "Did you mean ...?" suggestions for misspelt keys, enum values and model references.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace berth::manifests {

/// Optimal-string-alignment distance: insertions, deletions, substitutions and transpositions of
/// two adjacent characters each cost 1 ("prot" is 1 away from "port").
size_t EditDistance(std::string_view a, std::string_view b);

/// The candidate closest to `word`, or "" when none is close: a case-insensitive match, a prefix
/// either way ("tp" -> "tp_size"), or an edit distance of at most 3 (and at most half of
/// `word`'s length, so "x" suggests nothing).
std::string ClosestMatch(std::string_view word, std::span<const std::string_view> candidates);

/// "did you mean 'port'?" for ClosestMatch, or "" when nothing is close.
std::string DidYouMean(std::string_view word, std::span<const std::string_view> candidates);

}  // namespace berth::manifests
