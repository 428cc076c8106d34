// Preflight: what a start is checked for before anything goes dark. At plan time, from what was
// observed: the model's config.json names its architectures, and its weights, split over the
// service's GPUs, fit the memory the service claims on each. At apply time: the service's own
// `preflight:` command, a plan action placed before the first disruptive step. Internal to
// planners/; pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/desired.h"
#include "core/plan.h"
#include "planners/draft.h"
#include "planners/host_ledger.h"

namespace berth {

/// The problems a start of `t` has before it runs (step unset): its model's config.json is
/// missing, not JSON or names no architectures (checked when the wanted commit is complete in
/// the store), or its weights per GPU exceed the service's claim on a GPU (weights from the
/// store or the Hub; GPUs as observed or declared). Engines vllm and sglang; for llama-server,
/// its model_file must be a GGUF file of version 2 or 3 in the complete snapshot (the headers
/// the store scan read).
std::vector<Problem> ModelPreflight(const Transition& t, const std::vector<ResolvedModel>& models,
                                    HostLedger& host);

/// The preflight action of `s` (its `preflight:` command), or nullopt when it declares none.
std::optional<Action> PreflightAction(const ServiceSpec& s, const std::string& address);

/// Whether `s` gets an engine check: engine vllm, sglang or llama-server, and no
/// `preflight: {engine: off}`.
bool WantsEngineCheck(const ServiceSpec& s);

/// The engine check of `s` (reason kEngineCheck): the check program of its engine (a file name
/// in berth's engine-check folder, where the executor runs it from), for what its unit runs
/// (`exec`); the executor runs it with the unit's environment.
Action EngineCheckAction(const ServiceSpec& s, const std::string& address, UnitExec exec);

}  // namespace berth
