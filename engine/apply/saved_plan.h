// A plan saved for review (`berth plan --out FILE`) and carried out later, exactly, by
// `berth apply FILE` — or refused (exit 5) when anything it depends on has changed since.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/desired.h"
#include "core/observed.h"
#include "core/plan.h"
#include "core/status.h"

namespace berth {

/// The most berth reads of a saved plan (its unit files included); a bigger file is refused.
inline constexpr uint64_t kMaxSavedPlanBytes = uint64_t{64} << 20;
/// How far in the future a saved plan's created_unix may lie (clocks of one host disagree by
/// NTP steps, not by more): beyond it the plan is refused, whatever --max-age says.
inline constexpr int64_t kSavedPlanClockSkewS = 300;

struct SavedPlan {
  /// 2: the plan's switches, its side-by-side groups and each action's takes_down are saved
  /// (the executor runs them as the planner stated them). 3: each step's typed payload under
  /// "step". 4: a floor's goodput, its recorded reference and what it measures (commit,
  /// settings). 5: what the executor used to work out: each switch's health gate and front
  /// socket, a replaced sleeper's wake, each chain's gate, the download batches; a unit write's
  /// replaces, adopts and loses_edits. A plan of an older format is refused.
  static constexpr int kFormatVersion = 5;
  Plan plan;
  std::string manifest_path;
  std::string manifest_digest;
  std::string host;
  std::string state_lineage;
  uint64_t state_serial = 0;
  int64_t created_unix = 0;
  /// address -> digest of what was observed of it ("unit/x.service", "model/org/name",
  /// "port/8000", "gpu/0"), for every resource the plan touches or depends on.
  std::map<std::string, std::string> fingerprints;
};

/// `plan` made from `desired` (read from `manifest_path`) and `observed`, as saved for a later
/// `berth apply FILE`: berth's state lineage and serial come from `observed.state` (the live
/// state, or the one an offline observation carries), with the fingerprints of what it touches.
SavedPlan MakeSavedPlan(const Plan& plan, const Desired& desired, const Observed& observed,
                        const std::string& manifest_path, int64_t now_unix);

/// The observed facts each resource of `plan` depends on, digested.
std::map<std::string, std::string> Fingerprint(const Plan& plan, const Observed& observed);

std::string SavedPlanToJson(const SavedPlan& p);
Result<SavedPlan> SavedPlanFromJson(const std::string& text, const std::string& source);

/// Where `saved` (read from a file: not trusted) would do anything else than `fresh`, the plan
/// berth makes now from the manifest and the host: a step whose kind, target, unit content,
/// commit, health gate... differ, a step added or missing. Empty: they do the same, action for
/// action. Details and resource figures are not compared (they describe, they do not act).
std::vector<std::string> PlanDifferences(const Plan& saved, const Plan& fresh);

/// The resources `saved`'s actions depend on that it carries no fingerprint of (a file whose
/// fingerprints were cut down: apply could compare nothing of them). Checked once its actions are
/// known to be the ones berth makes now.
std::vector<std::string> MissingFingerprints(const SavedPlan& saved);

/// Why `saved` may no longer run against `now` (empty: still valid). `max_age_s` 0 = no limit.
/// A plan whose created_unix is more than kSavedPlanClockSkewS ahead of `now_unix` is stale
/// whatever `max_age_s` says (its age cannot be known).
std::vector<std::string> StaleReasons(const SavedPlan& saved, const std::string& manifest_digest,
                                      const std::string& lineage, uint64_t serial,
                                      const Observed& now, int64_t now_unix, int64_t max_age_s);

}  // namespace berth
