// What a switch of one service replaced, so that a failed gate can undo it. The executor takes it
// from the plan's Switch (SwitchesOf); an apply's journal keeps it (engine/state/state.h), so
// that a later run that resumes the switch's gates after a kill -9 undoes it the same way when
// one fails.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/plan.h"

namespace berth {

struct SwitchUndo {
  std::string address;  // "service/x": the service switched to
  std::string unit;     // its unit
  /// The services stopped to make room for it, each with its own health gate (Replaced::gate;
  /// port 0: berth knows none). Replaced::stop_step is the plan's and is not kept.
  std::vector<Replaced> replaced;
  /// An in-place update: its unit file as it was before the switch rewrote it (byte for byte,
  /// lineage line included); nullopt when the switch did not rewrite a file it restarted.
  std::optional<std::string> unit_before;
  /// Its own health gate, which an in-place undo waits for after the restart; port 0 (a
  /// journal written before it was kept): berth does not wait.
  HealthStep gate;
  /// Behind a front: its public port, the front's admin socket, and the server the front served
  /// before the switch began (Switch::undo_route), which an undo routes back to even when a
  /// later run resumes the switch; 0 and "" when the switch is not behind a front.
  int front_port = 0;
  std::string front_socket;
  std::string undo_route;
};

}  // namespace berth
