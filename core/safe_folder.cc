#include "core/safe_folder.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace berth {

Status MakeSafeFolder(const std::string& dir, const std::string& what) {
  if (dir.empty() || dir[0] != '/')
    return Status::InvalidArgument(what + " '" + dir + "' is not an absolute path");
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at < dir.size() && dir[at] != '/') continue;
    std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      return Status::IoError("cannot create " + what + " " + part + ": " + std::strerror(errno));
  }
  // Every folder of the path as the kernel resolves it (a link leads where it points).
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(dir, ec);
  if (ec) return Status::IoError("cannot resolve " + what + " " + dir + ": " + ec.message());
  const uid_t self = ::geteuid();
  for (std::filesystem::path p = real;; p = p.parent_path()) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0)
      return Status::IoError("cannot inspect " + p.string() + ": " + std::strerror(errno));
    const bool top = p == real;
    const bool root_sticky = st.st_uid == 0 && (st.st_mode & S_ISVTX);
    std::string problem;
    if (!S_ISDIR(st.st_mode))
      problem = "is not a folder";
    else if (st.st_uid != 0 && st.st_uid != self)
      problem = "is owned by uid " + std::to_string(st.st_uid) + ", not root";
    else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && (top || !root_sticky))
      problem = std::string("is writable by its ") +
                ((st.st_mode & S_IWOTH) ? "other users" : "group") + " (mode " +
                [&] {
                  char m[8];
                  std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(st.st_mode & 07777));
                  return std::string(m);
                }() +
                ")";
    if (!problem.empty())
      return Status::PermissionDenied(
          what + " " + dir + " is not safe to write into as root: " + p.string() + " " + problem +
          ", so another user could replace what berth writes there and root would load it; "
          "nothing was written. Make each folder of the path root's and writable by root alone "
          "(chown root:root, chmod go-w), or choose another folder");
    if (p == p.root_path()) break;
  }
  return Status::Ok();
}

}  // namespace berth
