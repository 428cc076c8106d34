// What the CLI's commands share.
#pragma once

#include <ostream>
#include <string>

#include "core/desired.h"

namespace berth {

/// Loads the manifest file or folder at `path`. When it is invalid, prints every problem (with
/// file:line:col) and a summary to `err`, and returns false.
bool LoadManifestOrExplain(const std::string& path, Desired* desired, std::ostream& err);

}  // namespace berth
