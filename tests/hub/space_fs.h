// The store's file system as it is, but with as many bytes free as a test says: the seam of
// `berth pull`'s free-space check (PullRequest::fs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "providers/store/store_fs.h"

namespace berth::testing {

class SpaceFs : public StoreFs {
 public:
  explicit SpaceFs(uint64_t free) : free_(free) {}
  Result<std::vector<DirEntry>> ListDir(const std::string& dir) override {
    return PosixStoreFs().ListDir(dir);
  }
  Result<FileStat> Stat(const std::string& path, bool follow) override {
    return PosixStoreFs().Stat(path, follow);
  }
  Result<std::string> ReadLink(const std::string& path) override {
    return PosixStoreFs().ReadLink(path);
  }
  Result<std::string> ReadSmallFile(const std::string& path, size_t max_bytes,
                                    bool follow) override {
    return PosixStoreFs().ReadSmallFile(path, max_bytes, follow);
  }
  /// The real total, `free` bytes free; counted in `asked`.
  Result<DiskSpace> SpaceOf(const std::string& path) override {
    ++asked;
    auto real = PosixStoreFs().SpaceOf(path);
    if (!real.ok()) return real;
    return DiskSpace{real->total_bytes, free_};
  }
  int asked = 0;

 private:
  uint64_t free_;
};

}  // namespace berth::testing
