// What a switch of one service replaced, so that a failed gate can undo it. The executor reads it
// off the plan it runs; an apply's journal keeps it (engine/state/state.h), so that a later run
// that resumes the switch's gates after a kill -9 undoes it the same way when one fails.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/core/plan.h"

namespace berth {

struct SwitchUndo {
  std::string address;  // "service/x": the service switched to
  std::string unit;     // its unit
  /// The stops that made room for it (kind kStop, for_service naming it), each with the
  /// stopped service's own health gate: unit, address, port, health_path, served_name,
  /// timeout_ms, interval_ms (port 0: berth knows none).
  std::vector<Action> stopped;
  /// An in-place update: its unit file as it was before the switch rewrote it (byte for byte,
  /// lineage line included); nullopt when the switch did not rewrite a file it restarted.
  std::optional<std::string> unit_before;
};

}  // namespace berth
