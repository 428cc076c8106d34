// The plan for people (text) and for programs (versioned JSON). Same plan, same bytes.
#pragma once

#include <ostream>
#include <string>

#include "core/desired.h"
#include "core/plan.h"

namespace berth {

struct PlanTextOptions {
  /// Every write-unit shows its unified diff (`berth plan --diff`). Default false: only an
  /// adopted unit (a hand-written file is replaced) and a drifted one (a hand edit is undone)
  /// show it; other writes keep their one-line detail.
  bool diffs = false;
};

/// Terraform-like: one numbered line per action with its symbol and reason (and, for a
/// write-unit, the diff of the file, see PlanTextOptions), then the kept resources, the
/// disruption, the disk summary, when blocked what is short and where, and the summary line.
std::string PlanToText(const Plan& plan, const Desired& desired,
                       const PlanTextOptions& options = {});
/// The same, written to `out` as it is made (a plan of 10,000 services is 7 MB of text).
void WritePlanText(std::ostream& out, const Plan& plan, const Desired& desired,
                   const PlanTextOptions& options = {});

/// The JSON form (format_version 1), documented in docs/plan-json.md.
std::string PlanToJson(const Plan& plan, const Desired& desired);
/// The same, written to `out`.
void WritePlanJson(std::ostream& out, const Plan& plan, const Desired& desired);

/// A dark window's estimate in words, for its disruption line: "about 42s (last 3 starts of
/// x.service took 38s–47s); at worst 15m47s (its 15m health timeout, then y.service's start,
/// 47s at the slowest recorded, if berth rolls back)"; "" when it has none.
std::string DarkEstimateText(const DarkEstimate& estimate);

/// "+", "~", "-", ">" for an action.
const char* ActionSymbol(const Action& action);

/// What a write-unit does to the file on disk: a unified diff of the observed file (without
/// berth's lineage line; /dev/null for a new unit) into the content berth writes, or a note in
/// parentheses when the old text is not known ("(no diff: the file is larger than 64 KiB
/// ...)"). "" for other actions, or when the texts are the same. Raw: the old text is not
/// berth's, escape it (EscapeControl) before it reaches a terminal.
std::string UnitFileDiff(const Action& action);

/// The last line of the text form: what the plan does, counted ("Plan: 1 model to download
/// (230 GB), 1 unit file to write, 1 daemon-reload, 1 service to start, 1 to stop, 1 health
/// gate; port 8000 dark from step 4 until step 6."); "" for a plan without actions.
std::string PlanSummary(const Plan& plan);

}  // namespace berth
