// The planner's working state between the diff (what must change) and the sequence (in which
// order, and can it run). Internal to planners/.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/desired.h"
#include "core/observed.h"
#include "core/plan.h"
#include "planners/llama_claim.h"

namespace berth {

class PlanIndex;

/// Where a resolved model's commit came from.
enum class CommitSource { kUnknown, kManifest, kLock, kHub, kStoreRef };
/// Where a resolved model's size came from.
enum class SizeSource { kUnknown, kHub, kStore, kManifest };

/// A desired model after resolving its revision and size against what was observed.
struct ResolvedModel {
  const ModelSpec* spec = nullptr;
  std::string commit;  // "" when it cannot be known offline
  CommitSource commit_source = CommitSource::kUnknown;
  std::string upstream;  // the commit the Hub says the revision points at now; "" when not asked
  std::optional<uint64_t> total_bytes;  // set exactly when size_source is not kUnknown
  SizeSource size_source = SizeSource::kUnknown;
  const ObservedRevision* present = nullptr;  // the wanted commit in the store, if any
  /// Bytes of the wanted commit's *.safetensors (include/exclude applied), from the store's
  /// complete snapshot or the Hub's listing; unset when neither says.
  std::optional<uint64_t> weights_bytes;
  std::string weights_source;  // "in the store", "on the Hub"

  bool used = false;  // a service wanted running serves it
};

/// A start, restart or stop the sequence must place.
struct Transition {
  ActionKind kind = ActionKind::kStart;  // kStart, kRestart or kStop
  std::string unit;
  std::string address;  // "service/<name>"
  Reason reason = Reason::kNotRunning;
  std::string detail;
  const ServiceSpec* spec = nullptr;  // the desired service, when the manifest names it
};

/// A download and what the disk check may count of it.
struct PlannedDownload {
  Action action;
  bool size_known = false;  // action.requires_.disk_bytes is known (Hub, store or size:)
};

/// A state-only service's facts in words, for its start (state_only.h).
struct StateOnlyWords {
  std::string known;    // "no engine: port, GPUs and GPU memory as berth saw it run"
  std::string unknown;  // a warning naming what is unknown and how to declare it; "" if none
};

/// What the unit of a service runs, as rendered: its ExecStart argv and environment.
struct UnitExec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // Environment=, "KEY=VALUE" in order
  std::string env_file;          // EnvironmentFile=, "" for none
};

struct Draft {
  std::optional<std::string> engine_check_dir;  // PlanOptions::engine_check_dir
  std::string berth_executable;                 // PlanOptions::berth_executable
  std::map<std::string, UnitExec> execs;        // unit name -> what it runs (engine services)
  std::vector<ResolvedModel> models;
  std::vector<PlannedDownload> downloads;
  std::vector<Action> unit_writes;
  bool reload_pending = false;     // systemd already wants a reload
  std::vector<Transition> starts;  // starts and restarts, in name order
  std::vector<Transition> stops;   // units to stop, in name order
  /// On-demand services' sockets (planners/on_demand.h): stops placed before every other
  /// start or stop (so no request wakes a server the plan stops), starts and restarts after.
  std::vector<Action> socket_stops;
  std::vector<Action> socket_starts;
  std::vector<Action> model_removals;
  std::vector<Action> unit_removals;
  /// Boot state: enables and disables, in name order; the sequence places each beside its
  /// unit's start (after the health gate) or stop.
  std::vector<Action> enables;
  std::vector<Action> disables;
  std::vector<Note> notes;
  std::vector<Problem> problems;  // known before sequencing (step 0)
  std::vector<std::string> warnings;
  std::map<std::string, StateOnlyWords> state_only;  // service name -> (state-only services)
  /// Service name -> the model id its server lists in /v1/models (EngineAdapter::ReportedName
  /// with the snapshot it is rendered with); "" = unknown, the health path alone decides.
  std::map<std::string, std::string> reported_names;
  /// Unit -> what a llama-server service without gpu_memory claims of each of its GPUs,
  /// derived from its GGUF file (DeriveLlamaClaims).
  std::map<std::string, LlamaClaim> llama_claims;
};

/// The resolved model named `name` in `models`, which are in name order (DiffModels resolves
/// them in the order of Desired::models); nullptr when none.
const ResolvedModel* FindResolved(const std::vector<ResolvedModel>& models,
                                  const std::string& name);

/// Downloads, model removals and model notes.
void DiffModels(const Desired& desired, const PlanIndex& index, Draft* draft);
/// Unit writes and removals, starts, restarts and stops.
void DiffServices(const Desired& desired, const PlanIndex& index, const std::string& berth_version,
                  Draft* draft);
/// Orders the draft into the plan's actions and checks disk, GPU memory and ports at each step.
/// What it places is moved out of `draft`; its models stay (the prewarms read them after).
void Sequence(const Desired& desired, const PlanIndex& index, Draft* draft, Plan* plan);

}  // namespace berth
