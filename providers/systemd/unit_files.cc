#include "providers/systemd/unit_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/core/atomic_file.h"
#include "engine/core/unit_marker.h"

namespace berth {
namespace {

Status Errno(const std::string& what) {
  int e = errno;
  std::string msg = what + ": " + std::strerror(e);
  if (e == EACCES || e == EPERM) return Status::PermissionDenied(msg + " (berth needs root here)");
  if (e == ENOSPC) return Status::IoError(msg + " (the filesystem is full)");
  return Status::IoError(msg);
}

}  // namespace

Result<bool> UnitFileStore::Write(const std::string& unit, const std::string& content) {
  auto existing = Read(unit);
  if (existing.ok() && existing->has_value() && **existing == content) return false;
  Status s = WriteFileAtomically(PathOf(unit), content, 0644);
  if (!s.ok())
    return s.WithContext("writing unit " + unit + " (the previous file, if any, is unchanged)");
  return true;
}

Result<bool> UnitFileStore::Remove(const std::string& unit) {
  std::string path = PathOf(unit);
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return false;
    return Errno("cannot remove " + path);
  }
  int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return true;
}

Result<std::optional<std::string>> UnitFileStore::Read(const std::string& unit) const {
  std::string path = PathOf(unit);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return std::optional<std::string>();
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return std::optional<std::string>();
    return Errno("cannot read " + path);
  }
  std::ostringstream s;
  s << in.rdbuf();
  return std::optional<std::string>(s.str());
}

Result<std::vector<std::string>> UnitFileStore::ListBerthUnits() const {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir_.c_str());
  if (!d) {
    if (errno == ENOENT) return out;
    return Errno("cannot list " + dir_);
  }
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() <= 8 || !name.ends_with(".service") || name[0] == '.') continue;
    std::ifstream in(dir_ + "/" + name);
    std::string first;
    std::getline(in, first);
    if (IsBerthUnit(first)) out.push_back(name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace berth
