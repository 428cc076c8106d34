// Observation of units: systemd's view (properties) joined with the files berth writes.
#pragma once

#include <string>
#include <vector>

#include "core/observed.h"
#include "providers/systemd/systemd_manager.h"
#include "providers/systemd/unit_files.h"

namespace berth {

/// The units `names` plus every unit berth wrote in the unit directory, each with its state and
/// its file: content hash, berth's marker and spec hash, content (berth's files only).
Result<std::vector<ObservedUnit>> ObserveUnits(SystemdManager& systemd, const UnitFileStore& files,
                                               std::vector<std::string> names);

}  // namespace berth
