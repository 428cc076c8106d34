#include "providers/store/store_fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/read_file.h"

namespace berth {
namespace {

Status Errno(const std::string& what, const std::string& path, int err) {
  std::string msg = what + " " + path + ": " + std::strerror(err);
  if (err == ENOENT || err == ENOTDIR) return Status::NotFound(msg);
  if (err == EACCES || err == EPERM) return Status::PermissionDenied(msg);
  return Status::IoError(msg);
}

FileType TypeOf(mode_t mode) {
  if (S_ISREG(mode)) return FileType::kFile;
  if (S_ISDIR(mode)) return FileType::kDir;
  if (S_ISLNK(mode)) return FileType::kSymlink;
  return FileType::kOther;
}

class PosixFs : public StoreFs {
 public:
  Result<std::vector<DirEntry>> ListDir(const std::string& dir) override {
    DIR* d = opendir(dir.c_str());
    if (!d) return Errno("cannot list", dir, errno);
    std::vector<DirEntry> out;
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      DirEntry entry{e->d_name, FileType::kOther};
      switch (e->d_type) {
        case DT_REG:
          entry.type = FileType::kFile;
          break;
        case DT_DIR:
          entry.type = FileType::kDir;
          break;
        case DT_LNK:
          entry.type = FileType::kSymlink;
          break;
        case DT_UNKNOWN: {  // some file systems do not fill d_type
          struct stat st;
          if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            entry.type = TypeOf(st.st_mode);
          break;
        }
        default:
          break;
      }
      out.push_back(std::move(entry));
    }
    closedir(d);
    return out;
  }

  Result<FileStat> Stat(const std::string& path, bool follow) override {
    struct stat st;
    int rc = follow ? stat(path.c_str(), &st) : lstat(path.c_str(), &st);
    if (rc != 0) return Errno("cannot stat", path, errno);
    FileStat fs;
    fs.type = TypeOf(st.st_mode);
    fs.size = static_cast<uint64_t>(st.st_size);
    fs.allocated = static_cast<uint64_t>(st.st_blocks) * 512;
    fs.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    return fs;
  }

  Result<std::string> ReadLink(const std::string& path) override {
    char buf[4096];
    ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
    if (n < 0) return Errno("cannot read link", path, errno);
    if (n >= static_cast<ssize_t>(sizeof(buf)))
      return Status::IoError("link target too long: " + path);
    return std::string(buf, static_cast<size_t>(n));
  }

  Result<std::string> ReadSmallFile(const std::string& path, size_t max_bytes,
                                    bool follow) override {
    return ReadRegularFile(path, {.max_bytes = max_bytes, .follow_links = follow});
  }

  Result<std::string> ReadPrefix(const std::string& path, size_t max_bytes, bool follow) override {
    Result<int> fd = OpenRegularFile(path, {.max_bytes = UINT64_MAX, .follow_links = follow});
    if (!fd.ok()) return fd.status();
    std::string out(max_bytes, '\0');
    size_t got = 0;
    while (got < max_bytes) {
      ssize_t n = ::read(*fd, out.data() + got, max_bytes - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int e = errno;
        ::close(*fd);
        return Errno("cannot read", path, e);
      }
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    ::close(*fd);
    out.resize(got);
    return out;
  }

  Result<DiskSpace> SpaceOf(const std::string& path) override {
    struct statvfs v;
    if (statvfs(path.c_str(), &v) != 0) return Errno("cannot statvfs", path, errno);
    return DiskSpace{static_cast<uint64_t>(v.f_blocks) * v.f_frsize,
                     static_cast<uint64_t>(v.f_bavail) * v.f_frsize};
  }
};

}  // namespace

StoreFs& PosixStoreFs() {
  static PosixFs fs;
  return fs;
}

}  // namespace berth
