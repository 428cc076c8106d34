#include "planners/glob.h"

#include <fnmatch.h>

namespace berth {
namespace {

std::string AddWildcardToDirectories(const std::string& pattern) {
  if (!pattern.empty() && pattern.back() == '/') return pattern + "*";
  return pattern;
}

}  // namespace

bool GlobMatch(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

bool IncludedByFilters(const std::string& path, const std::vector<std::string>& include,
                       const std::vector<std::string>& exclude) {
  bool included = include.empty();
  for (const auto& p : include) included = included || GlobMatch(AddWildcardToDirectories(p), path);
  if (!included) return false;
  for (const auto& p : exclude)
    if (GlobMatch(AddWildcardToDirectories(p), path)) return false;
  return true;
}

}  // namespace berth
