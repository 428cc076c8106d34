#include "providers/systemd/unit_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/atomic_file.h"
#include "core/read_file.h"
#include "core/safe_folder.h"
#include "core/unit_marker.h"

namespace berth {
namespace {

Status Errno(const std::string& what) {
  int e = errno;
  std::string msg = what + ": " + std::strerror(e);
  if (e == EACCES || e == EPERM) return Status::PermissionDenied(msg + " (berth needs root here)");
  if (e == ENOSPC) return Status::IoError(msg + " (the filesystem is full)");
  return Status::IoError(msg);
}

// A unit file is small; anything bigger is not one berth could have written.
constexpr uint64_t kMaxUnitBytes = 1 << 20;

// The content of the regular file at `path`; nullopt when there is none. Never blocks: a FIFO or
// a device where a unit file should be is an error, not a read that waits forever. A link is
// followed (systemctl link and mask put links here, and systemd follows them), to a regular file
// only; berth's own writes rename over a link, never through it.
Result<std::optional<std::string>> ReadRegular(const std::string& path) {
  Result<std::string> text =
      ReadRegularFile(path, {.max_bytes = kMaxUnitBytes, .follow_links = true});
  if (text.ok()) return std::optional<std::string>(std::move(text).value());
  if (text.status().code() == Status::Code::kNotFound) return std::optional<std::string>();
  if (text.status().code() == Status::Code::kInvalidArgument)
    return Status::FailedPrecondition(text.status().message() +
                                      " (it cannot be a unit file berth reads)");
  return text.status();
}

}  // namespace

Result<bool> UnitFileStore::Write(const std::string& unit, const std::string& content) {
  auto existing = Read(unit);
  if (existing.ok() && existing->has_value() && **existing == content) return false;
  // systemd runs what a unit file says as root: a folder another user may write is refused.
  BERTH_RETURN_IF_ERROR(
      MakeSafeFolder(dir_, "the unit folder (host.unit_dir)").WithContext("writing unit " + unit));
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
  return ReadRegular(PathOf(unit));
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
    // Services, and the sockets of on-demand services.
    if (name.size() <= 8 || !(name.ends_with(".service") || name.ends_with(".socket")) ||
        name[0] == '.')
      continue;
    // What cannot be read as a regular file is not berth's (it would carry the marker).
    auto text = ReadRegular(dir_ + "/" + name);
    if (text.ok() && text->has_value() && IsBerthUnit(**text)) out.push_back(name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace berth
