// The fleet's turn as the executor sees it (engine/fleet/fleet_turn.h in berth): taken before
// the first step that takes a service down, checked before each later one, given back when the
// run ends (after its gates passed, or its undo).
#pragma once

#include <string>

#include "core/status.h"

namespace berth {

class TurnSeam {
 public:
  virtual ~TurnSeam() = default;
  /// Blocks until this host may go dark. Not ok: nothing may go dark now.
  virtual Status Acquire() = 0;
  /// Whether the turn taken is still this host's (its lease alive); `why` says why not.
  virtual bool StillHeld(std::string* why) = 0;
  /// Gives it back. Idempotent.
  virtual void Release() = 0;
};

}  // namespace berth
