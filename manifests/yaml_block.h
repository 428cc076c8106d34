// The block reader: a fast reader for the YAML manifests are written in (block maps and lists,
// one-line flow lists and maps, plain and one-line quoted scalars, comments). It gives up on
// anything else (anchors, tags, block scalars, multi-line scalars, tabs, scalars
// holding non-ASCII text, a second
// document, and every syntax error) and yaml-cpp reads the file instead; what it accepts it reads
// to the same tree as yaml-cpp (tests/manifests/yaml_block_test.cc compares the two on every
// manifest in the repository and on thousands of mutations of them). yaml-cpp's scanner takes
// about 1 s for a manifest of 10,000 services; this reader, 25 ms.
#pragma once

#include <string_view>

#include "manifests/yaml_tree.h"

namespace berth::manifests {

/// Reads `text` into `doc` (setting its root) and returns true; or returns false, leaving the
/// reading to yaml-cpp, when `text` holds anything the block reader does not read.
bool ReadBlockYaml(std::string_view text, YamlDocument* doc);

}  // namespace berth::manifests
