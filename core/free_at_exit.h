// Whether a one-shot command frees what it built before the process exits. At 10,000
// services the manifests, the observation and the plan are a million small blocks: freeing
// them took 50 to 80 ms after `berth plan` had written its answer, for memory the exit gives
// back at once.
#pragma once

#include <memory>

namespace berth {

/// Set by main() for the commands that make one pass and exit (berth plan); never for the
/// loop, which would keep every pass. Default: free as usual (tests, the loop).
void SetFreeAtExit(bool free);
bool FreesAtExit();

/// Destroys what `owned` holds now, or, in a one-shot command, leaves it to the exit.
template <class T>
void DiscardAtEnd(std::unique_ptr<T> owned) {
  if (!FreesAtExit()) static_cast<void>(owned.release());  // the exit frees it
}

}  // namespace berth
