// The tune file of `berth tune` (issue 40): which service to try, the candidate configurations
// (listed, or a product of axes), the load each is measured at and what "best" means, decoded
// into a TuneSpec (core/tune.h) with file:line:col diagnostics, as manifests are. The format is
// docs/tune.md's "The tune file".
#pragma once

#include <string>
#include <vector>

#include "core/tune.h"
#include "manifests/loader.h"

namespace berth {

/// The most candidates one tune file may make (the baseline not counted).
inline constexpr size_t kMaxTuneCandidates = 256;

struct TuneLoadResult {
  TuneSpec spec;
  std::vector<Diagnostic> diagnostics;  // every problem of the file, in line order
  bool ok() const { return diagnostics.empty(); }
};

/// Reads and decodes the tune file at `path` (a regular file of at most kMaxManifestFileBytes;
/// a link is followed). Never throws: a file that cannot be read is one diagnostic naming it.
TuneLoadResult LoadTuneFile(const std::string& path);

/// The same for `text`, named `file_name` in diagnostics and TuneSpec::file.
TuneLoadResult LoadTuneText(const std::string& file_name, const std::string& text);

}  // namespace berth
