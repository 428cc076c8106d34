#include "planners/glob.h"

#include <fnmatch.h>

namespace berth {

bool GlobMatch(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

}  // namespace berth
