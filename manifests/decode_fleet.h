// `fleet:` of one manifest file (decode_fleet.cc).
#pragma once

#include "core/desired.h"
#include "manifests/yaml_reader.h"

namespace berth::manifests {

/// Decodes `fleet:` into `fleet`, reporting every problem; a fleet without name or etcd is left
/// disabled (empty name).
void DecodeFleet(YamlReader& r, const Field& field, FleetSpec* fleet);

}  // namespace berth::manifests
