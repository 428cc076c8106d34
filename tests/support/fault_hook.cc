// The fault seam of berth_faulty, the test build of berth's main (tests/e2e/CMakeLists.txt):
// with $BERTH_FAULT_KILL_AT_STEP=N, `berth apply` and `berth reconcile` SIGKILL themselves as
// step N begins, once the journal says it runs and before it acts: what a kill -9 during that
// step leaves. berth links engine/cli/no_faults.cc instead and never reads the variable.
#include <signal.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

#include "engine/cli/commands.h"

namespace berth {

std::function<void(int step)> FaultHook() {
  const char* text = std::getenv("BERTH_FAULT_KILL_AT_STEP");
  int step = 0;
  if (!text || std::from_chars(text, text + std::strlen(text), step).ec != std::errc() || step <= 0)
    return nullptr;
  return [step](int now) {
    if (now == step) ::raise(SIGKILL);
  };
}

}  // namespace berth
