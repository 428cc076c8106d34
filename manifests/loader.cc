#include "manifests/loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <system_error>
#include <tuple>
#include <utility>

#include "core/hash.h"
#include "core/lock_file.h"
#include "core/untrusted_text.h"
#include "manifests/decode.h"
#include "manifests/merge.h"

namespace berth {
namespace {

namespace fs = std::filesystem;

using Files = std::vector<std::pair<std::string, std::string>>;

bool IsManifestName(const fs::path& p) {
  const std::string name = p.filename().string();
  if (name.empty() || name[0] == '.') return false;  // editor droppings, hidden files
  const std::string ext = p.extension().string();
  return ext == ".yaml" || ext == ".yml";
}

// What a file of more than kMaxManifestFileBytes is told.
std::string TooLarge(uint64_t size) {
  return "larger than berth reads (" + std::to_string(size) + " bytes; at most " +
         std::to_string(kMaxManifestFileBytes) +
         " bytes, 4 MiB): a manifest or berth.lock is a few KiB, check that this is the file "
         "meant";
}

// Reads `file` into `bytes`; "" on success, else what went wrong. A FIFO, a device or a socket
// is refused without blocking: the file is opened with O_NONBLOCK and checked with fstat before
// any read. A file over kMaxManifestFileBytes is refused before it is read (and one that grows
// past it while read). `own` is a file berth writes itself (berth.lock): a link there is
// refused, not followed (core/read_file.h reads the same way).
std::string ReadRegularFile(const std::string& file, std::string* bytes, bool own = false) {
  int fd =
      ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (own ? O_NOFOLLOW : 0));
  if (fd < 0 && own && errno == ELOOP)
    return "a symbolic link; berth writes this file itself and does not follow a link there: "
           "remove the link (berth lock writes the file again)";
  if (fd < 0) return std::string("cannot open file: ") + std::strerror(errno);
  std::string problem;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    problem = std::string("cannot stat file: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem =
        "not a regular file (a manifest is a regular *.yaml or *.yml file, berth.lock a "
        "regular JSON file)";
  } else if (static_cast<uint64_t>(st.st_size) > kMaxManifestFileBytes) {
    problem = TooLarge(static_cast<uint64_t>(st.st_size));
  } else {
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        problem = std::string("cannot read file: ") + std::strerror(errno);
        break;
      }
      if (n == 0) break;
      bytes->append(buf, static_cast<size_t>(n));
      if (bytes->size() > kMaxManifestFileBytes) {
        problem = TooLarge(bytes->size()) + ", and it grew while read";
        bytes->clear();
        break;
      }
    }
  }
  ::close(fd);
  return problem;
}

}  // namespace

std::vector<std::string> ListManifestFiles(const std::string& path,
                                           std::vector<Diagnostic>* diagnostics) {
  std::error_code ec;
  const SourceLoc where{path, 0, 0};
  fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    diagnostics->push_back({where, "no such file or folder", "pass a manifest file or a folder"});
    return {};
  }
  if (!fs::is_directory(status)) return {path};
  std::vector<std::string> files;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (!IsManifestName(it->path())) continue;
    const std::string file = (fs::path(path) / it->path().filename()).string();
    std::error_code type_ec;
    fs::file_status target = fs::status(it->path(), type_ec);
    if (!fs::exists(target)) {
      // A link to nothing is a manifest berth cannot read, not an absent one: skipping it would
      // remove the services it held.
      std::error_code link_ec;
      fs::path to = fs::read_symlink(it->path(), link_ec);
      diagnostics->push_back({SourceLoc{file, 0, 0},
                              link_ec
                                  ? "cannot read: " + type_ec.message()
                                  : "symbolic link to '" + to.string() + "', which does not exist",
                              "fix or remove the link"});
      continue;
    }
    if (!fs::is_regular_file(target) && !fs::is_directory(target)) {
      diagnostics->push_back({SourceLoc{file, 0, 0}, "not a regular file",
                              "a manifest is a regular *.yaml or *.yml file"});
      continue;
    }
    if (fs::is_regular_file(target)) files.push_back(file);
  }
  if (ec) {
    diagnostics->push_back({where, "cannot list folder: " + ec.message(), ""});
    return {};
  }
  std::sort(files.begin(), files.end());
  if (files.empty() && diagnostics->empty()) {
    diagnostics->push_back(
        {where, "no manifest files in folder", "berth reads the *.yaml and *.yml files in it"});
  }
  return files;
}

namespace {

// Problems sorted by file (in input order; problems without a file first), line, column.
void SortDiagnostics(const Files& files, std::vector<Diagnostic>* diagnostics) {
  std::map<std::string, int> order;
  for (const auto& [name, text] : files) order.emplace(name, static_cast<int>(order.size()));
  auto key = [&](const Diagnostic& d) {
    auto it = order.find(d.loc.file);
    return std::make_tuple(it == order.end() ? -1 : it->second, d.loc.line, d.loc.column);
  };
  std::stable_sort(diagnostics->begin(), diagnostics->end(),
                   [&](const Diagnostic& a, const Diagnostic& b) { return key(a) < key(b); });
}

// Reads berth.lock's entries into `desired` (a lock is optional; a malformed one is a problem of
// that file).
void ReadLock(const std::string& lock_path, const std::string& text, Desired* desired,
              std::vector<Diagnostic>* diagnostics) {
  auto entries = ParseLockFile(text);
  if (!entries.ok()) {
    diagnostics->push_back({SourceLoc{lock_path, 0, 0}, entries.status().message(),
                            "fix it by hand, or remove it and run berth lock to write it again"});
    return;
  }
  desired->locks = std::move(entries).value();
}

LoadResult LoadFiles(const Files& files, const LockText& lock,
                     std::vector<Diagnostic> diagnostics) {
  std::vector<manifests::FilePart> parts;
  std::string digest_input;
  for (const auto& [name, text] : files) {
    if (text.size() > kMaxManifestFileBytes) {
      diagnostics.push_back({SourceLoc{name, 0, 0}, TooLarge(text.size()), ""});
      continue;
    }
    parts.push_back(manifests::DecodeFile(name, text, &diagnostics));
    digest_input += name;
    digest_input += '\0';
    digest_input += text;
    digest_input += '\0';
  }
  LoadResult result;
  result.desired = manifests::MergeParts(std::move(parts), &diagnostics);
  for (const auto& [name, text] : files) result.desired.files.push_back(name);
  if (lock) {
    // The lock changes the plan like a manifest does: it is part of the digest.
    digest_input += lock->first;
    digest_input += '\0';
    digest_input += lock->second;
    digest_input += '\0';
    result.desired.lock_path = lock->first;
    ReadLock(lock->first, lock->second, &result.desired, &diagnostics);
  }
  result.desired.digest = Sha256Hex(digest_input);
  SortDiagnostics(files, &diagnostics);
  result.diagnostics = std::move(diagnostics);
  return result;
}

}  // namespace

std::string Diagnostic::ToString() const {
  std::string out = loc.ToString() + ": " + message;
  if (!hint.empty()) out += " (" + hint + ")";
  return EscapeLine(out);
}

LoadResult LoadManifests(const std::string& path, const ManifestEdit* edit) {
  try {
    std::vector<Diagnostic> diagnostics;
    Files files;
    bool edited = false;
    for (const std::string& file : ListManifestFiles(path, &diagnostics)) {
      if (edit && file == edit->file) {
        files.emplace_back(file, edit->text);
        edited = true;
        continue;
      }
      std::string bytes;
      if (std::string problem = ReadRegularFile(file, &bytes); !problem.empty()) {
        diagnostics.push_back({SourceLoc{file, 0, 0}, problem, ""});
        continue;
      }
      files.emplace_back(file, std::move(bytes));
    }
    if (edit && !edited)
      diagnostics.push_back(
          {SourceLoc{edit->file, 0, 0}, "not a file of the manifest " + path, ""});
    LockText lock;
    const std::string lock_path = LockFilePath(path);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(lock_path, ec))) {
      std::string bytes;
      if (std::string problem = ReadRegularFile(lock_path, &bytes, /*own=*/true); !problem.empty())
        diagnostics.push_back({SourceLoc{lock_path, 0, 0}, problem, ""});
      else
        lock.emplace(lock_path, std::move(bytes));
    }
    LoadResult result = LoadFiles(files, lock, std::move(diagnostics));
    result.desired.lock_path = lock_path;
    return result;
  } catch (const std::exception& e) {
    LoadResult result;
    result.diagnostics.push_back(
        {SourceLoc{path, 0, 0}, std::string("cannot load: ") + e.what(), ""});
    return result;
  } catch (...) {
    LoadResult result;
    result.diagnostics.push_back({SourceLoc{path, 0, 0}, "cannot load: unknown error", ""});
    return result;
  }
}

LoadResult LoadManifestTexts(const std::vector<std::pair<std::string, std::string>>& files,
                             const LockText& lock) {
  try {
    return LoadFiles(files, lock, {});
  } catch (const std::exception& e) {
    LoadResult result;
    result.diagnostics.push_back({SourceLoc{}, std::string("cannot load: ") + e.what(), ""});
    return result;
  } catch (...) {
    LoadResult result;
    result.diagnostics.push_back({SourceLoc{}, "cannot load: unknown error", ""});
    return result;
  }
}

}  // namespace berth
