#include "core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace berth {
namespace {

Status Fail(const std::string& what, const std::string& tmp, int e) {
  ::unlink(tmp.c_str());
  std::string msg = what + ": " + std::strerror(e);
  if (e == ENOSPC) msg += " (the filesystem is full)";
  if (e == EACCES || e == EPERM) return Status::PermissionDenied(msg);
  return Status::IoError(msg);
}

}  // namespace

Status WriteFileAtomically(const std::string& path, std::string_view data, unsigned mode) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  // A dot name: readers of the folder (node_exporter, systemd) skip it.
  std::string tmp = dir + "/." + base + ".tmp." + std::to_string(::getpid());
  // A new file, never a link or anything else left at the temp name: O_EXCL (with O_CREAT it
  // does not follow a link either). What an earlier, killed run left there is removed first.
  const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(tmp.c_str(), flags, 0600);
  if (fd < 0 && errno == EEXIST && ::unlink(tmp.c_str()) == 0)
    fd = ::open(tmp.c_str(), flags, 0600);
  if (fd < 0) return Fail("cannot write " + path + " (creating " + tmp + ")", tmp, errno);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return Fail("cannot write " + tmp, tmp, e);
    }
    done += static_cast<size_t>(n);
  }
  int e = 0;
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) e = errno;
  if (e == 0 && ::fsync(fd) != 0) e = errno;
  if (::close(fd) != 0 && e == 0) e = errno;
  if (e != 0) return Fail("cannot write " + tmp, tmp, e);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Fail("cannot rename to " + path, tmp, errno);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

std::vector<std::string> RemoveOrphanedTempFiles(const std::string& dir) {
  std::vector<std::string> removed;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return removed;
  while (const dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    size_t at = name.rfind(".tmp.");
    if (name.size() < 2 || name[0] != '.' || at == std::string_view::npos || at == 0) continue;
    std::string_view digits = name.substr(at + 5);
    long pid = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) continue;
    if (pid <= INT32_MAX && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)) continue;
    std::string path = dir + "/" + std::string(name);
    struct stat st;
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(path.c_str()) == 0)
      removed.emplace_back(name);
  }
  ::closedir(d);
  return removed;
}

}  // namespace berth
