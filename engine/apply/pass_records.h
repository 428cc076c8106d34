// What a reconcile pass records besides running its plan: what berth's state learns from the
// actions that ran, the services it counts up, and the switches its journal carries.
#pragma once

#include <vector>

#include "core/desired.h"
#include "core/observed.h"
#include "core/plan.h"
#include "core/switch_undo.h"
#include "engine/apply/executor.h"
#include "engine/apply/reconciler.h"
#include "engine/state/state.h"

namespace berth {

/// What the state learns from the actions that ran (the journal says which).
void Record(const Plan& plan, const Journal& journal, const ExecResult& exec, State* st);

/// Adds to the state's start times the last start of each on-demand server of `d` that `o`
/// shows and berth has not recorded (State::RecordObservedStart): a start a request made, which
/// no executor timed. Each invocation once. True when it added one.
bool RecordRequestStarts(const Desired& d, const Observed& o, State* st);

/// Whether a failure of step `i` (0-based) holds the change: the step takes a service down (the
/// plan's Action::takes_down), or it is a start, restart, wake or gate (a replacement that
/// failed, undone). Anything else (a download, a unit write, a preflight) is retried as usual.
bool FailureHoldsTheChange(const Plan& plan, size_t i);

/// How many of the services the manifest wants running run, and which (into `r`).
void CountUp(const Desired& d, const Observed& o, RunReport* r);

}  // namespace berth
