// The naming rules of the manifest language, as pure checks. Each returns "" when `text` is
// valid, otherwise the reason, phrased to follow "'<text>' is not a valid ...: ".
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/hf_cache.h"

namespace berth::manifests {

/// Model keys: ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$.
std::string ModelNameProblem(std::string_view name);

/// Service keys: `<name>.service` must be a valid systemd unit name: letters, digits and
/// ":_.-" only, not starting with '.', at most 255 characters in all.
std::string UnitNameProblem(std::string_view name);

/// "hf://org/name" -> "org/name", by core/hf_cache.h's ParseHfSource; nullopt if
/// malformed or if it names a revision ("@rev": the manifest has revision: for that).
std::optional<std::string> ParseHfSource(std::string_view source);

/// A branch, tag or commit as the Hub takes it (core/hf_cache.h).
using ::berth::IsRevision;

/// Environment variable names: ^[A-Za-z_][A-Za-z0-9_]*$.
bool IsEnvKey(std::string_view key);

/// A path relative to the model snapshot: non-empty, not absolute, no ".." component
/// (core/hf_cache.h).
using ::berth::IsSnapshotRelativePath;

}  // namespace berth::manifests
