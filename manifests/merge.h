// Merging the files of a manifest into one Desired, and the rules that span files: `host` given
// once, model and service names defined once, models referenced by services exist, and no two
// running services on one port.
#pragma once

#include <vector>

#include "core/desired.h"
#include "manifests/decode.h"
#include "manifests/loader.h"

namespace berth::manifests {

/// Merges `parts` (in file order) into a Desired, appending to `diagnostics`. `files` and
/// `digest` are left for the caller.
Desired MergeParts(std::vector<FilePart> parts, std::vector<Diagnostic>* diagnostics);

}  // namespace berth::manifests
