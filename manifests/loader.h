// Loading manifests: YAML files (one file, or every *.yaml / *.yml of a folder merged) into a
// validated Desired. The only user of yaml-cpp in berth.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/desired.h"

namespace berth {

/// The largest manifest file (and berth.lock) berth reads: 4 MiB. A real manifest is a few KiB;
/// the YAML parser holds about ten times a file's size, so a bigger one is refused before it is
/// read, with a diagnostic naming it.
inline constexpr size_t kMaxManifestFileBytes = 4 * 1024 * 1024;

struct Diagnostic {
  SourceLoc loc;
  std::string message;  // "unknown key 'gpu_memory_utilisation'"
  std::string hint;     // "did you mean 'gpu_memory_utilization'?" or ""
  /// "berth.yaml:12:7: unknown key ... (did you mean ...?)", on one line: controls and stray
  /// bytes of a file name or a quoted value are shown as \xNN (EscapeLine).
  std::string ToString() const;
};

struct LoadResult {
  Desired desired;
  std::vector<Diagnostic> diagnostics;  // every problem of the input, in file/line order
  bool ok() const { return diagnostics.empty(); }
};

/// One manifest file's text in place of what is on disk: berth tune's candidate, the declaring
/// file with the candidate's settings set (manifests/service_edit.h).
struct ManifestEdit {
  std::string file;  // as ListManifestFiles names it: `path` itself, or path/<name>.yaml
  std::string text;
};

/// Loads `path` (a file, or a folder whose *.yaml/*.yml files are merged in name order) and
/// validates it, with berth.lock beside it when there is one (LockFilePath): its entries become
/// Desired::locks and its bytes part of the digest; a malformed lock is a diagnostic of that
/// file. With `edit`, that file's text is edit->text (a file `path` does not hold is a
/// diagnostic). Never throws; all problems come back as diagnostics.
LoadResult LoadManifests(const std::string& path, const ManifestEdit* edit = nullptr);

/// The manifest files `path` names: itself, or the *.yaml / *.yml files of the folder (hidden
/// ones left out) in name order. When some cannot be read or there are none, `diagnostics` says
/// why (the folder's readable files are still listed).
std::vector<std::string> ListManifestFiles(const std::string& path,
                                           std::vector<Diagnostic>* diagnostics);

/// berth.lock as (path, text), when there is one.
using LockText = std::optional<std::pair<std::string, std::string>>;

/// The same for in-memory files (name -> text), for tests and the fuzzer.
LoadResult LoadManifestTexts(const std::vector<std::pair<std::string, std::string>>& files,
                             const LockText& lock = std::nullopt);

}  // namespace berth
