// The signals `berth reconcile` and `berth apply` listen to.
#pragma once

#include <atomic>

namespace berth {

/// SIGINT/SIGTERM set `stop` (a second one kills as usual), SIGHUP sets `reload`; each handler
/// also writes a byte to a pipe whose read end is `wake_fd` (give it to SystemClock so a sleep
/// ends at once).
struct LoopSignals {
  std::atomic<bool>* stop = nullptr;
  std::atomic<bool>* reload = nullptr;
  int wake_fd = -1;
};
/// Installs the handlers (once per process; later calls return the same flags).
LoopSignals InstallLoopSignals();

}  // namespace berth
