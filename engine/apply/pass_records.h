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

/// Whether a failure of this kind of action came after (or as) a service going dark. A
/// preflight runs before anything goes dark: its failure is retried like a download's.
bool TookAServiceDown(ActionKind k);

/// How many of the services the manifest wants running run, and which (into `r`).
void CountUp(const Desired& d, const Observed& o, RunReport* r);

/// The switches the journal of this run keeps: those an interrupted apply began whose gates
/// this plan runs again (what they replaced first, then what this plan adds), and this plan's
/// own.
std::vector<SwitchUndo> CarrySwitches(const std::vector<SwitchUndo>& earlier,
                                      std::vector<SwitchUndo> fresh, const Plan& plan);

}  // namespace berth
