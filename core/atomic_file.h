// Files that are either entirely old or entirely new: a temp file beside the target, created
// new (never through a link left at its name), written, chmod'ed (whatever the umask),
// fsync'ed, renamed over (a link at the target is replaced, not written through), and the
// folder fsync'ed.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace berth {

/// On failure the target is untouched and no temp file is left.
Status WriteFileAtomically(const std::string& path, std::string_view data, unsigned mode = 0644);

}  // namespace berth
