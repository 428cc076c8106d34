// The repository's own files as test corpora (the readers' tests compare berth's fast readers
// with yaml-cpp and nlohmann on every YAML and JSON file of the tree). Header-only.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace berth::testing {

/// Every regular file under BERTH_SOURCE_DIR whose name ends with one of `suffixes` and that is
/// smaller than `max_bytes`, sorted; build folders, .git and node_modules are not searched.
inline std::vector<std::filesystem::path> RepositoryFiles(
    std::initializer_list<std::string_view> suffixes, uintmax_t max_bytes = uintmax_t{8} << 20) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(BERTH_SOURCE_DIR);
       it != fs::recursive_directory_iterator(); ++it) {
    std::string name = it->path().filename().string();
    if (it->is_directory() &&
        (name == ".git" || name.starts_with("build") || name == "node_modules")) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() || it->file_size() >= max_bytes) continue;
    for (std::string_view suffix : suffixes) {
      if (name.ends_with(suffix)) {
        files.push_back(it->path());
        break;
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

/// A file's bytes ("" when it cannot be read).
inline std::string FileText(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace berth::testing
