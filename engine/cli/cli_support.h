// What the CLI's commands share.
#pragma once

#include <ostream>
#include <string>

#include "engine/core/desired.h"

namespace berth {

/// Loads the manifest file or folder at `path`. When it is invalid, prints every problem (with
/// file:line:col) and a summary to `err`, and returns false.
bool LoadManifestOrExplain(const std::string& path, Desired* desired, std::ostream& err);

/// hf://org/name[@revision] -> repo id and revision ("main" when none); prints why not to `err`.
bool ParseSource(const std::string& source, std::string* repo, std::string* revision,
                 std::ostream& err);

}  // namespace berth
