// Prewarm: a switch that takes a service down first (stop-first, a restart in place, a held
// port) reads the new weights into the page cache before anything goes dark, so that the new
// server's start reads them from memory instead of disk. Host memory is the third ledger beside
// disk and GPU memory: the weights a plan prewarms must fit in what the kernel says is available
// (MemAvailable) less a margin, added up over the plan's prewarms. Where they do not fit, or
// berth cannot tell, the plan says why not. Internal to planners/.
#pragma once

#include <cstdint>
#include <vector>

#include "core/desired.h"
#include "core/observed.h"
#include "core/plan.h"
#include "planners/draft.h"

namespace berth {

/// What a prewarm leaves free of host memory: a tenth of it, at least 2 GiB (the new server's
/// own memory, the other services, the kernel).
uint64_t PrewarmMargin(uint64_t memory_total);

/// Adds a kPrewarm step before each dark switch's first step whose new weights fit in memory,
/// and a note for each that does not (or cannot be told). `models`: the plan's resolved models.
void PlanPrewarms(const Desired& desired, const Observed& observed,
                  const std::vector<ResolvedModel>& models, Plan* plan);

}  // namespace berth
