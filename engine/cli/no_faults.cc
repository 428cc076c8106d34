// berth itself has no fault seam: nothing it reads makes it hurt itself. The crash tests build
// berth_faulty from the same main with tests/support/fault_hook.cc in place of this file.
#include "engine/cli/commands.h"

namespace berth {

std::function<void(int step)> FaultHook() { return nullptr; }

}  // namespace berth
