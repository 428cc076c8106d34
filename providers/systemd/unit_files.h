// The unit files berth writes, in a configured directory (/etc/systemd/system in production, a
// sandbox's unit directory in tests).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/core/status.h"

namespace berth {

class UnitFileStore {
 public:
  explicit UnitFileStore(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }
  std::string PathOf(const std::string& unit) const { return dir_ + "/" + unit; }
  /// Atomically: a temp file in the same directory, fsync, rename over, fsync the directory;
  /// mode 0644. Returns whether the bytes on disk changed.
  Result<bool> Write(const std::string& unit, const std::string& content);
  /// Removes the file; a missing file is not an error. Returns whether a file was removed.
  Result<bool> Remove(const std::string& unit);
  /// The file's content, or nullopt when it does not exist.
  Result<std::optional<std::string>> Read(const std::string& unit) const;
  /// Names of the *.service files in the directory that carry berth's marker.
  Result<std::vector<std::string>> ListBerthUnits() const;

 private:
  std::string dir_;
};

}  // namespace berth
