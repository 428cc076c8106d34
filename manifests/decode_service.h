// One `services:` entry: its keys, the engine blocks and the rules within one service.
#pragma once

#include "manifests/decode.h"
#include "manifests/yaml_reader.h"

namespace berth::manifests {

/// Decodes `entry` (name: {…}) into a draft, reporting every problem through `r`. The draft is
/// returned even when it has problems, so later checks (model references, ports) still run.
ServiceDraft DecodeService(YamlReader& r, const Field& entry);

}  // namespace berth::manifests
