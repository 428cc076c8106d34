// The planner: Desired × Observed → Plan. Pure: no I/O, no clock, deterministic; the same
// inputs give the same plan, byte for byte once printed.
#pragma once

#include <optional>
#include <string>

#include "core/desired.h"
#include "core/hf_cache.h"
#include "core/observed.h"
#include "core/plan.h"

namespace berth {

struct PlanOptions {
  std::string berth_version = BERTH_VERSION;  // written into unit headers
  /// The folder of berth's engine-check programs (vllm_check.py, sglang_check.py), found by
  /// the caller next to berth's executable. "" : looked for and not found (each engine check
  /// is left out, with a warning). Unset (default): no engine checks, no warning (a caller
  /// that runs no engine, such as a test of the plan's other steps).
  std::optional<std::string> engine_check_dir;
  /// berth's own executable, which the units of on-demand services run (`berth __wait-healthy`,
  /// `berth __wake-proxy`), found by the caller (/proc/self/exe); host.executables.berth wins.
  std::string berth_executable = "/usr/bin/berth";
};

/// The ordered, checked plan. Observed.state is berth's inventory: only what it lists (and
/// units carrying berth's marker) is ever pruned.
Plan MakePlan(const Desired& desired, const Observed& observed, const PlanOptions& options = {});

/// The facts of a plan the executor runs on, stated once its actions are final (MakePlan calls
/// it last; a test that builds a plan by hand may too): Action::takes_down of each stop,
/// restart and step a port's dark window begins at; Plan::groups (ParallelStarts); Plan::downloads
/// (each run of consecutive downloads); each switch's needs_turn and group.
void MarkTurnsAndGroups(Plan* plan);

/// The store directory berth uses: host.store, else the observed store's path.
std::string StorePath(const Desired& desired, const Observed& observed);
// SnapshotPath(store, repo_id, commit), once declared here, is in core/hf_cache.h.

}  // namespace berth
