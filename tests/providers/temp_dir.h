// A scratch directory for a test, removed with everything in it when the test ends.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace berth::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "berth-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

  /// Writes `content` to `rel`, creating parent directories.
  void Write(const std::string& rel, const std::string& content) const {
    std::filesystem::path p = path_ + "/" + rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
  }
  /// Makes `rel` a symlink to `target` (as written, not resolved), creating parent directories.
  void Link(const std::string& target, const std::string& rel) const {
    std::filesystem::path p = path_ + "/" + rel;
    std::filesystem::create_directories(p.parent_path());
    std::filesystem::create_symlink(target, p);
  }
  void MkDir(const std::string& rel) const {
    std::filesystem::create_directories(path_ + "/" + rel);
  }

 private:
  std::string path_;
};

}  // namespace berth::testing
