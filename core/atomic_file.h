// Files that are either entirely old or entirely new: a temp file beside the target, created
// new (never through a link left at its name), written, chmod'ed (whatever the umask),
// fsync'ed, renamed over (a link at the target is replaced, not written through), and the
// folder fsync'ed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace berth {

/// On failure the target is untouched and no temp file is left.
Status WriteFileAtomically(const std::string& path, std::string_view data, unsigned mode = 0644);

/// Removes the temp files WriteFileAtomically left in `dir` when its process was killed between
/// the create and the rename (".NAME.tmp.PID" whose PID no longer runs); a live process's are
/// kept. For a folder whose writers hold a lock the caller holds. Returns the names removed.
std::vector<std::string> RemoveOrphanedTempFiles(const std::string& dir);

}  // namespace berth
