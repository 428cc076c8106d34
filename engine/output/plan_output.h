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

/// "+", "~", "-", ">" for an action.
const char* ActionSymbol(const Action& action);

}  // namespace berth
