// Glob matching for host.match (fnmatch: '*' also crosses '/'). The include/exclude filter of a
// model's files is FileWanted in core/hf_cache.h.
#pragma once

#include <string>

namespace berth {

bool GlobMatch(const std::string& pattern, const std::string& text);

}  // namespace berth
