// The unit files berth writes, in a configured directory (/etc/systemd/system in production, a
// sandbox's unit directory in tests).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace berth {

/// The unit directory as the executor and the observer use it.
class UnitFiles {
 public:
  virtual ~UnitFiles() = default;
  virtual const std::string& dir() const = 0;
  std::string PathOf(const std::string& unit) const { return dir() + "/" + unit; }
  /// Writes `content` as `unit` atomically; returns whether the bytes on disk changed.
  virtual Result<bool> Write(const std::string& unit, const std::string& content) = 0;
  /// Removes the file; a missing file is not an error. Returns whether a file was removed.
  virtual Result<bool> Remove(const std::string& unit) = 0;
  /// The file's content, or nullopt when it does not exist.
  virtual Result<std::optional<std::string>> Read(const std::string& unit) const = 0;
  /// Names of the *.service and *.socket files in the directory that carry berth's marker.
  virtual Result<std::vector<std::string>> ListBerthUnits() const = 0;
};

/// The real unit directory on disk.
class UnitFileStore : public UnitFiles {
 public:
  explicit UnitFileStore(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const override { return dir_; }
  /// Atomically: a temp file in the same directory, fsync, rename over, fsync the directory;
  /// mode 0644.
  Result<bool> Write(const std::string& unit, const std::string& content) override;
  Result<bool> Remove(const std::string& unit) override;
  Result<std::optional<std::string>> Read(const std::string& unit) const override;
  Result<std::vector<std::string>> ListBerthUnits() const override;

 private:
  std::string dir_;
};

}  // namespace berth
