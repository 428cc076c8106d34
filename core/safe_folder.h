// The folders berth writes into as root: a file there is something root later loads (a front's
// HAProxy configuration, a unit file), so the folder and every folder above it must be such that
// no other user could have put, or could replace, what berth wrote. As sshd's StrictModes.
#pragma once

#include <string>

#include "core/status.h"

namespace berth {

/// Creates `dir` and its missing parents (0755), then checks it and every folder above it, the
/// links on the way followed: each a directory owned by root or by berth's own user, writable
/// by neither its group nor others; a folder above may be writable by all when it is root's and
/// sticky (/tmp: nobody else may rename or remove what is in it). `what` names the folder in the
/// error ("the fronts' folder (host.front_dir)"), which says who owns what and what to do.
Status MakeSafeFolder(const std::string& dir, const std::string& what);

}  // namespace berth
