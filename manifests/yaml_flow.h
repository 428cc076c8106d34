// A parsed YAML node written back as one line of flow text ("[0, 1]", "{method: mtp}"), which
// reads back as the same value: how the tune file stores the values it sets (core/tune.h).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "manifests/yaml_tree.h"

namespace berth::manifests {

/// How deep a node's lists and maps may nest, and how long its text may be, for FlowText.
inline constexpr int kMaxFlowDepth = 32;
inline constexpr size_t kMaxFlowBytes = 64 * 1024;

/// `node` as YAML flow text: a scalar as written, in double quotes when it was quoted in the file
/// or when its plain text would read differently in a flow collection ("a,b", "x: y", "&x");
/// null as "null"; a list as "[a, b]", a map as "{k: v, k2: v2}" (source order); an explicit tag
/// as "!<tag> " before the node ("!!str" becomes quotes instead). nullopt when the node nests
/// deeper than kMaxFlowDepth or its text passes kMaxFlowBytes (an alias can make a node its own
/// child, or repeat a big one).
std::optional<std::string> FlowText(const YamlNode& node);

}  // namespace berth::manifests
