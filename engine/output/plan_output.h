// The plan for people (text) and for programs (versioned JSON). Same plan, same bytes.
#pragma once

#include <string>

#include "engine/core/desired.h"
#include "engine/core/plan.h"

namespace berth {

/// Terraform-like: one numbered line per action with its symbol and reason, then the kept
/// resources, the disruption, the disk summary and, when blocked, what is short and where.
std::string PlanToText(const Plan& plan, const Desired& desired);

/// The JSON form (format_version 1), documented in engine/output/PLAN_JSON.md.
std::string PlanToJson(const Plan& plan, const Desired& desired);

/// A dark window's estimate in words, for its disruption line: "about 42s (last 3 starts of
/// x.service took 38s–47s); at worst 15m47s (its 15m health timeout, then y.service's start,
/// 47s at the slowest recorded, if berth rolls back)"; "" when it has none.
std::string DarkEstimateText(const DarkEstimate& estimate);

/// "+", "~", "-", ">" for an action.
const char* ActionSymbol(const Action& action);

}  // namespace berth
