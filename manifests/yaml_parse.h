// Turning a file's text into a YamlDocument with yaml-cpp, its errors (and its known hangs) kept
// behind this seam.
#pragma once

#include <optional>
#include <string>

#include "manifests/yaml_reader.h"
#include "manifests/yaml_tree.h"

namespace berth::manifests {

/// The first YAML document of `text` (a null node for an empty file). A syntax error becomes
/// one diagnostic at the parser's position, and nullopt: the rest of the file is skipped. A
/// second document ("---") is reported, since a manifest file holds one. Never throws.
std::optional<YamlDocument> ParseDocument(YamlReader& r, const std::string& text);

}  // namespace berth::manifests
