// How long each dark window of a plan is likely to last: from the start-to-healthy times berth
// recorded for the unit whose health gate ends it (BerthState::start_times_ms), and at worst.
// Informative only: nothing acts on an estimate, and a saved plan is not compared on it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/observed.h"
#include "core/plan.h"

namespace berth {

/// Fills Disruption::estimate for every disruption of `plan` that a health gate ends: the
/// median of the gated unit's recorded times (none recorded: no expectation), and the worst
/// case, its health timeout plus, for a replacement berth rolls back when it fails, the start
/// of each service the rollback brings back (its slowest recorded start, or its own timeout).
/// Disruptions that stay dark (no until_step) or end without a gate keep an empty estimate.
void EstimateDarkWindows(const Observed& observed, Plan* plan);

/// The median of `ms` (the mean of the two middle values for an even count); 0 when empty.
uint64_t MedianMs(std::vector<uint64_t> ms);

}  // namespace berth
