// State-only services (no engine: berth starts or stops a unit it does not write). berth knows
// their port and GPUs only from the manifest (port, gpus, gpu_memory, when declared) or from
// what it saw them hold while they ran, remembered in its state. Pure, like the rest of
// planners/.
#pragma once

#include <map>
#include <string>

#include "core/desired.h"
#include "core/observed.h"

namespace berth {

struct Draft;
class PlanIndex;

/// What the state-only services of `desired` whose units run hold now, as observed (their
/// units' listening ports and GPU processes), merged into `learned` (unit -> facts): a fact
/// observed replaces the one remembered; one not observed (no port open yet while it loads, a
/// section that could not be observed) leaves the remembered one. Returns whether `learned`
/// changed.
bool LearnStateOnly(const Desired& desired, const Observed& observed,
                    std::map<std::string, LearnedService>* learned);

/// `desired` with each state-only service's port, GPUs and per-GPU memory (gpu_memory) filled
/// in where the manifest does not declare them: from what its unit holds now when it runs, else
/// from observed.state.learned. The lowest learned port stands for the service. A service whose
/// GPUs are known but not its memory is ordered stop-first (what holds its GPUs and is to stop
/// stops before it starts). What each start can say of where these came from, and what stays
/// unknown, goes to draft->state_only.
Desired ResolveStateOnly(const Desired& desired, const PlanIndex& index, Draft* draft);

}  // namespace berth
