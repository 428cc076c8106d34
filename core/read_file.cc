#include "core/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/units.h"

namespace berth {
namespace {

Status FromErrno(const std::string& what, int e) {
  std::string msg = what + ": " + std::strerror(e);
  if (e == ENOENT || e == ENOTDIR) return Status::NotFound(msg);
  if (e == EACCES || e == EPERM) return Status::PermissionDenied(msg);
  return Status::IoError(msg);
}

// What a link points at, for a message: cut short, control characters shown as '?'.
std::string LinkTarget(const std::string& path) {
  char buf[256];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n <= 0) return "";
  std::string target(buf, static_cast<size_t>(n));
  for (char& c : target)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  if (n == static_cast<ssize_t>(sizeof buf)) target += "...";
  return " to '" + target + "'";
}

Status IsALink(const std::string& path) {
  return Status::InvalidArgument(path + " is a symbolic link" + LinkTarget(path) +
                                 "; berth does not follow links where it writes its own files "
                                 "(one could point anywhere): remove the link");
}

const char* KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "something else";
}

Status NotRegular(const std::string& path, mode_t mode) {
  return Status::InvalidArgument(path + " is not a regular file (it is " + KindOf(mode) +
                                 "); berth reads only regular files there (reading this one "
                                 "could block or never end): move it away");
}

// `size`: "is 22.0 GB" or "holds" (a file that grows, or one that reports no size: /proc's).
Status TooLarge(const std::string& path, const std::string& size, uint64_t max) {
  return Status::InvalidArgument(path + " " + size + " more than the " + FormatBytes(max) +
                                 " berth reads of such a file; it is not one berth wrote: move "
                                 "it aside");
}

int OpenFlags(bool follow) {
  return O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (follow ? 0 : O_NOFOLLOW);
}

// Clears O_NONBLOCK: the file is a regular one, and a later read must not see EAGAIN.
void Block(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

// fstat of an open `fd`: an error (and `fd` closed) unless it is a regular file.
Result<struct stat> StatRegular(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return FromErrno("cannot stat " + path, e);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return NotRegular(path, st.st_mode);
  }
  return st;
}

}  // namespace

Result<int> OpenRegularFile(const std::string& path, const FileReadOptions& options,
                            uint64_t* size) {
  int fd = ::open(path.c_str(), OpenFlags(options.follow_links));
  if (fd < 0) {
    int e = errno;
    if (e == ELOOP && !options.follow_links) return IsALink(path);
    return FromErrno("cannot open " + path, e);
  }
  Result<struct stat> st = StatRegular(fd, path);
  if (!st.ok()) return st.status();
  if (static_cast<uint64_t>(st->st_size) > options.max_bytes) {
    ::close(fd);
    return TooLarge(path, "is " + FormatBytes(static_cast<uint64_t>(st->st_size)) + ",",
                    options.max_bytes);
  }
  Block(fd);
  if (size) *size = static_cast<uint64_t>(st->st_size);
  return fd;
}

Result<std::string> ReadRegularFile(const std::string& path, const FileReadOptions& options) {
  uint64_t size = 0;
  Result<int> opened = OpenRegularFile(path, options, &size);
  if (!opened.ok()) return opened.status();
  int fd = *opened;
  std::string out;
  out.reserve(static_cast<size_t>(size));
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return FromErrno("cannot read " + path, e);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > options.max_bytes) {
      ::close(fd);
      return TooLarge(path, "holds", options.max_bytes);
    }
  }
  ::close(fd);
  return out;
}

Result<int> OpenLockFile(const std::string& path) {
  int fd =
      ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) {
    int e = errno;
    if (e == ELOOP) return IsALink(path);
    return FromErrno("cannot open " + path, e);
  }
  Result<struct stat> st = StatRegular(fd, path);
  if (!st.ok()) return st.status();
  Block(fd);
  return fd;
}

}  // namespace berth
