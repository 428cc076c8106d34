#include "engine/loop/manifest_probe.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "core/lock_file.h"

namespace berth {
namespace {

std::string StatLine(const std::string& name, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return name + " missing\n";
  return name + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) + " " +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "\n";
}

bool IsManifestName(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;
  return name.ends_with(".yaml") || name.ends_with(".yml");
}

}  // namespace

std::string ManifestFingerprint(const std::string& path) {
  namespace fs = std::filesystem;
  // berth.lock is read with the manifests: a `berth lock --update` pulled in is a change too.
  std::string out = StatLine(".", path) + StatLine(kLockFileName, LockFilePath(path));
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return out;
  std::vector<std::string> names;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (IsManifestName(name)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const auto& n : names) out += StatLine(n, (fs::path(path) / n).string());
  return out;
}

}  // namespace berth
