// The few file-system calls the store scan makes: a seam so tests can count and fault them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace berth {

enum class FileType { kOther, kFile, kDir, kSymlink };

struct DirEntry {
  std::string name;
  FileType type = FileType::kOther;  // without following symlinks
};

struct FileStat {
  FileType type = FileType::kOther;
  uint64_t size = 0;
  /// Bytes the file system holds for it (st_blocks * 512); less than `size` for a sparse file
  /// (a chunked partial download is sized to the whole blob up front). UINT64_MAX: unknown.
  uint64_t allocated = UINT64_MAX;
  int64_t mtime_ns = 0;
};

struct DiskSpace {
  uint64_t total_bytes = 0;  // f_blocks * f_frsize
  uint64_t free_bytes = 0;   // f_bavail * f_frsize: what an unprivileged writer may use
};

class StoreFs {
 public:
  virtual ~StoreFs() = default;
  /// Names in `dir` except "." and "..", unsorted. NotFound if `dir` does not exist.
  virtual Result<std::vector<DirEntry>> ListDir(const std::string& dir) = 0;
  /// stat(2) (`follow`) or lstat(2). NotFound if nothing is there (or a symlink dangles).
  virtual Result<FileStat> Stat(const std::string& path, bool follow) = 0;
  virtual Result<std::string> ReadLink(const std::string& path) = 0;
  /// The whole content of a small regular file (refs, berth records, a snapshot's config.json);
  /// an error past `max_bytes`, for a FIFO, a device or a folder (never a read that blocks),
  /// and, unless `follow`, for a symbolic link (a snapshot's files are links into blobs/).
  virtual Result<std::string> ReadSmallFile(const std::string& path, size_t max_bytes,
                                            bool follow) = 0;
  virtual Result<DiskSpace> SpaceOf(const std::string& path) = 0;
  /// The first `max_bytes` (or fewer) of a regular file of any size (a GGUF file's header),
  /// with ReadSmallFile's refusals but not its size limit. By default (a fake store of small
  /// files): ReadSmallFile.
  virtual Result<std::string> ReadPrefix(const std::string& path, size_t max_bytes, bool follow) {
    return ReadSmallFile(path, max_bytes, follow);
  }
};

/// The real one: POSIX calls.
StoreFs& PosixStoreFs();

}  // namespace berth
