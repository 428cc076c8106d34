// Glob matching as huggingface_hub does it (fnmatch: '*' also crosses '/', a pattern ending
// in '/' matches everything below that folder), and for host.match.
#pragma once

#include <string>
#include <vector>

namespace berth {

bool GlobMatch(const std::string& pattern, const std::string& text);

/// huggingface_hub's filter_repo_objects: kept if it matches any include (or there are none)
/// and no exclude.
bool IncludedByFilters(const std::string& path, const std::vector<std::string>& include,
                       const std::vector<std::string>& exclude);

}  // namespace berth
