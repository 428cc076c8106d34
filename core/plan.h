// Plan: the ordered actions that turn Observed into Desired, each with its reason, and the
// verdict on whether it can run. A value: planners build it, the executor runs it, outputs print
// it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/steps.h"

namespace berth {

enum class ActionKind {
  kDownload,
  kRemoveModel,
  kWriteUnit,
  kRemoveUnit,
  kDaemonReload,
  kStart,
  kStop,
  kRestart,
  kWaitHealthy,
  kEnable,   // the unit starts at boot (systemctl enable: WantedBy= symlinks)
  kDisable,  // the unit no longer starts at boot
  /// Before anything goes dark: a service's own `preflight:` command must exit 0, or (reason
  /// kEngineCheck) the engine's own validation of the unit's argv and environment must pass.
  kPreflight,
  /// A gate after wait-healthy: one completion (or chat) request must return non-empty text.
  /// Gates after the health gate fail a switch like it (IsGate); another kind (a throughput
  /// floor) sits beside this one.
  kSmoke,
  /// A gate after the smoke gate: a throughput floor measured for a bounded time.
  kFloor,
  /// The last gate: the new service watched for a while (its restarts, its health, the front's
  /// 5xx answers from it).
  kSoak,
  /// Before a switch takes a service down: its floor's load on that service, the reference a
  /// relative floor compares with. Not a gate: a reference that cannot be measured fails nothing.
  kReference,
  /// A front's HAProxy configuration written (and, when the front runs, reloaded seamlessly).
  kWriteFront,
  /// A front sends new requests to one backend, or holds them; the others drain.
  kRoute,
  /// Wait until a front has no request in flight on a backend (bounded), before its stop.
  kDrain,
  /// A front's readiness path for an outside load balancer turns 200 or 503.
  kReady,
  /// Before a switch takes its service down: the new weights read into the page cache, so that
  /// the start reads them from memory. Not a gate: a prewarm that fails fails nothing.
  kPrewarm,
  /// A `standby: sleep` service put to sleep instead of stopped (vLLM's sleep mode): its GPU
  /// memory freed, its weights kept in host memory, its process and port kept.
  kSleep,
  /// A sleeping service woken instead of started cold: the start of its switch; its gates
  /// follow as after a start.
  kWake,
};
const char* ActionKindName(ActionKind k);  // "download", "remove-model", ...
/// A gate that must pass after a start or restart: the health gate and the gates that follow
/// it (smoke). A failed gate is rolled back and holds the change like a failed start.
bool IsGate(ActionKind k);

/// Why an action is in the plan. Stable names: they are part of the JSON form.
enum class Reason {
  kModelMissing,      // not in the store
  kModelPartial,      // in the store, incomplete: resume
  kRevisionChanged,   // another commit than the store's: berth.lock, the manifest or upstream moved
  kUnitMissing,       // no unit file yet
  kUnitChanged,       // the wanted unit differs from the one berth wrote
  kUnitDrift,         // the file on disk was edited by hand
  kUnitAdopted,       // adopt: true takes over a unit berth did not write
  kUnitFilesChanged,  // daemon-reload after unit file changes
  kPendingReload,     // systemd reports NeedDaemonReload
  kNotRunning,        // wanted running, observed inactive
  kFailed,            // wanted running, observed failed
  kConfigChanged,     // running, its unit changed: restart
  kModelUpdated,      // running, its model moved to another commit: restart
  kWantedStopped,     // state: stopped
  kWantedAbsent,      // state: absent
  kNotInManifest,     // berth created it, the manifest no longer names it
  kFreesResources,    // stopped now because a start needs its GPUs or port
  kHealthGate,        // wait-healthy after a start
  kNotUsed,           // keep: false and no running service uses it
  kOldRevision,       // a revision berth downloaded that nothing asks for, past host.keep_revisions
  kNotEnabled,        // wanted running, but a reboot would not start it (disabled)
  kPreflight,         // the service's preflight command, before anything goes dark
  kSmokeGate,         // smoke: one request must return text after the health gate
  kFloorGate,         // floor: throughput and time to first token measured after it
  kSoakGate,          // soak: the new service watched for a while after every other gate
  /// A gate of a switch that an apply began but was stopped (kill -9, power lost) before the
  /// gate passed: the next run gates the service again, every gate of its chain.
  kInterruptedSwitch,
  /// The engine check of a service that starts: the engine's own argument parser and
  /// configuration for the unit's argv and environment, loading no weights (preflight).
  kEngineCheck,
  /// A relative floor's reference: the service the switch replaces, measured before it stops.
  kFloorReference,
  /// A dark switch's new weights fit in host memory: read into the page cache before it goes
  /// dark.
  kPrewarm,
  /// standby: sleep: put to sleep instead of stopped, host memory holding its weights.
  kStandby,
  /// Wanted running and asleep: woken instead of a cold start.
  kAsleep,
  /// Asleep, but host memory can no longer hold its weights beside the margin: stopped.
  kStandbyEvicted,
};
const char* ReasonName(Reason r);  // "model_missing", ...

/// Resources an action needs or gives back.
struct Resources {
  uint64_t disk_bytes = 0;
  std::map<int, uint64_t> gpu_bytes;  // GPU index -> bytes
  std::vector<int> ports;
  bool empty() const { return disk_bytes == 0 && gpu_bytes.empty() && ports.empty(); }
};

struct Action {
  ActionKind kind = ActionKind::kDownload;
  std::string
      address;  // "model/minimax-m25", "service/vllm-minimax-m25", "unit/x.service", "systemd"
  Reason reason = Reason::kModelMissing;
  std::string detail;   // human: "ExecStart changed: --port 8000 → 8001"
  Resources requires_;  // what must be available when it runs
  Resources frees;      // what it gives back
  std::string unit;     // the unit of a unit or service step, and of a gate
  /// Set by the planner: this step takes a service down (a stop, a restart, or the step a
  /// port's dark window begins at). The fleet's turn must be held before it runs; the executor
  /// reads this and works out nothing.
  bool takes_down = false;
  /// What the step needs to run, by kind (core/steps.h; PayloadFits says which kind holds
  /// which).
  StepPayload step;

  /// The payload, which must be of the kind's type (the planner and the saved-plan reader
  /// build nothing else; a mismatch is a bug and throws std::bad_variant_access).
  template <class T>
  const T& As() const {
    return std::get<T>(step);
  }
  template <class T>
  T& As() {
    if (std::holds_alternative<std::monostate>(step)) step = T{};
    return std::get<T>(step);
  }
  /// Whether the payload is a T.
  template <class T>
  bool Holds() const {
    return std::holds_alternative<T>(step);
  }
};

/// Whether `step` is the payload type of kind `k` (a saved plan's reader checks every step).
bool PayloadFits(ActionKind k, const StepPayload& step);
/// A fresh payload of the type kind `k` holds.
StepPayload PayloadFor(ActionKind k);
/// An action of kind `k` with its empty payload.
Action MakeAction(ActionKind k, std::string address = "", Reason reason = Reason::kModelMissing);

/// Something the plan leaves as it is but a reviewer wants to see ("= keep model/kimi ...",
/// "= no prewarm service/x ...").
struct Note {
  std::string address;
  std::string detail;
  std::string verb = "keep";  // what the plan does with it: "keep", "no prewarm"
};

/// A service a rollback starts again after the failed change, before the port serves again.
struct RollbackStart {
  std::string unit;
  std::vector<uint64_t> samples_ms;  // its recorded start-to-healthy times, oldest first
  uint64_t timeout_ms = 0;           // its own health timeout; 0: berth knows no health check
};

/// The expected length of a dark window, from the stop times berth recorded for the unit whose
/// stop begins it and the start-to-healthy times of the unit whose health gate ends it, and the
/// worst case.
struct DarkEstimate {
  std::string gate_unit;             // whose health gate ends the window; "" = no estimate
  std::vector<uint64_t> samples_ms;  // its recorded start-to-healthy times, oldest first
  /// The median of samples_ms, plus the median of stop_samples_ms; no start recorded: empty.
  std::optional<uint64_t> expected_ms;
  uint64_t gate_timeout_ms = 0;  // its health timeout
  /// The unit whose stop or restart begins the window ("": it begins otherwise): a server
  /// draining requests stops listening at once and exits only when they end, or at its stop
  /// timeout (llama-server waits 30 s). For a restart, the start times already hold the stop.
  std::string stop_unit;
  std::vector<uint64_t> stop_samples_ms;  // its recorded stop times (a stop, not a restart)
  /// Its TimeoutStopSec as systemd has it, ms: 0 unknown, ObservedUnit::kNoStopTimeout none.
  uint64_t stop_timeout_ms = 0;
  /// What a rollback of the change starts again before the port serves (in order); empty when
  /// the change is not a replacement berth rolls back.
  std::vector<RollbackStart> rollback;
  /// stop_timeout_ms (when known and finite) + gate_timeout_ms + each rollback start (slowest
  /// recorded, or timeout)
  uint64_t worst_ms = 0;
};

/// A port that serves nobody between two steps (0-based indexes into Plan::actions, inclusive,
/// like every step of the plan; shown 1-based only where printed for people).
struct Disruption {
  int port = 0;
  size_t from_step = 0;
  std::optional<size_t> until_step;  // nullopt: stays closed (service stopped for good)
  std::string service;               // who served it before
  std::string reason;
  /// Why "nothing serves it after this plan" (no until_step) holds only as far as berth knows:
  /// the starts (0-based) of services on ports berth does not know, and in words (written by
  /// MarkTurnsAndGroups, once the steps are final): "service/x starts at step 2 on a port berth
  /// does not know"; "" when berth knows.
  std::vector<size_t> unknown_port_starts;
  std::string caveat;
  /// How long it is likely to last (planners/dark_windows.h); informative only: a saved plan is
  /// not compared on it. Empty when nothing ends it (no until_step) or no health gate does.
  DarkEstimate estimate;
  /// Behind a front: "held" (the port stays open; requests wait, up to hold_ms, from_step to
  /// until_step, the route to the new backend), or "none" (make-before-break: no request
  /// waits; `reason` says how). "" : dark (refused).
  std::string front_mode;
  uint64_t hold_ms = 0;
};

/// How a switch keeps its port: what a client of the port sees while it runs.
enum class SwitchMode {
  kFresh,       // starts a service that replaces nothing and restarts nothing
  kStartFirst,  // new before old: what it replaces stops after its gates (other GPUs or port)
  kStopFirst,   // what it replaces stops first: the port is dark until the new one is healthy
  kInPlace,     // a restart of the same unit: dark for the restart
  /// Behind a front (the port is held by HAProxy): the new service starts on its internal port,
  /// its gates run there, the front routes to it, the old backend drains, then stops. No dark
  /// window.
  kMakeBeforeBreak,
  /// Behind a front without room for both: the front holds requests (they wait, up to the
  /// front's hold bound) while the old one drains and stops and the new one starts; refused
  /// never, answered 503 with Retry-After past the bound.
  kHold,
};
const char* SwitchModeName(SwitchMode m);  // "fresh", "start-first", ... (stable: JSON)

/// A service a switch stops to make room, and how the switch's undo brings it back.
struct Replaced {
  std::string address;   // "service/vllm-kimi-k25"
  std::string unit;      // "vllm-kimi-k25.service"
  size_t stop_step = 0;  // its stop (0-based index into Plan::actions)
  /// Its own health gate, which the undo waits for after starting it again; port 0: berth
  /// knows no health check for it.
  HealthStep gate;
  /// Put to sleep (kSleep), not stopped: the undo wakes it (a start when it no longer runs).
  bool asleep = false;
  /// Asleep: how the undo wakes it (host, port, timeout_ms); port 0: berth knows no port to
  /// reach it on, and the undo starts it cold.
  StandbyStep wake;
};

/// One switch: the start or restart of one service, with its gates, what it replaces, and how
/// it is undone. The planner states all of it; the executor runs it and infers nothing.
struct Switch {
  std::string address;  // "service/x": the service switched to
  std::string unit;
  SwitchMode mode = SwitchMode::kFresh;
  std::vector<size_t> steps;  // every action of the switch, 0-based, in plan order
  size_t start = 0;           // its start or restart
  std::vector<size_t> gates;  // its wait-healthy, smoke and floor, in order
  /// Its health gate (the wait-healthy among `gates`): its start-to-healthy time is recorded
  /// there, and an in-place undo waits for it again. nullopt: it has none.
  std::optional<size_t> health_gate;
  /// What the undo starts again after stopping the new service (in order).
  std::vector<Replaced> replaces;
  /// An in-place update of a rewritten unit: the undo writes the unit file back as it was when
  /// the apply began (read then, kept in the journal), reloads and restarts it.
  bool restores_unit = false;
  /// Some step of it takes a service down (a stop, a restart, a dark window): the fleet's turn
  /// must be held before its first such step.
  bool needs_turn = false;
  /// The public port whose front it is behind (0: none), that front's admin socket (where its
  /// undo routes), and its internal (backend) port.
  int front_port = 0;
  std::string front_socket;
  int backend_port = 0;
  /// Behind a front: the server the undo routes the front back to (the old backend, or "hold"
  /// when nothing served); "" when the switch is not behind a front.
  std::string undo_route;
  int group = -1;  // its index in Plan::groups when it starts side by side with others; -1: none
};

/// Why the plan cannot run.
struct Problem {
  /// The step that cannot run (0-based index into Plan::actions, shown 1-based where printed);
  /// nullopt: before any step (the manifest, the host as a whole).
  std::optional<size_t> step;
  std::string resource;  // "disk", "gpu 3", "port 8000", "unit x.service", "manifest"
  std::string message;
  uint64_t needed = 0;
  uint64_t available = 0;
};

/// One service of a side-by-side group: its start or restart, its health gate, and the last of
/// the enables and disables that follow it (0-based indexes into Plan::actions).
struct Chain {
  size_t start = 0, gate = 0, last = 0;
  friend bool operator==(const Chain&, const Chain&) = default;
};

/// Services brought up side by side: consecutive chains on pairwise disjoint GPUs and ports,
/// steps first..last (0-based, inclusive).
struct ParallelGroup {
  size_t first = 0, last = 0;
  std::vector<Chain> chains;  // two or more
};

/// Downloads that run at once: steps first..last (0-based, inclusive), all downloads.
struct DownloadBatch {
  size_t first = 0, last = 0;
  friend bool operator==(const DownloadBatch&, const DownloadBatch&) = default;
};

struct Plan {
  static constexpr int kFormatVersion = 1;  // the JSON form (plan-json.md)
  std::string host;
  bool host_matches = true;  // false: the manifest's host.match excludes this host
  std::string skip_reason;
  std::vector<Action> actions;
  std::vector<Note> notes;
  std::vector<Disruption> disruptions;
  std::vector<Switch> switches;          // one per service started or restarted, in plan order
  std::vector<ParallelGroup> groups;     // the side-by-side starts (ParallelStarts), in plan order
  std::vector<DownloadBatch> downloads;  // the downloads that run at once, in plan order
  std::vector<Problem> problems;         // non-empty: blocked
  std::vector<std::string> warnings;     // checks that could not be made, assumptions
  // Disk summary, for the reviewer.
  uint64_t disk_needed = 0;
  uint64_t disk_free = 0;
  uint64_t disk_reserve = 0;
  bool disk_known = true;

  bool blocked() const { return !problems.empty(); }
  bool empty() const { return actions.empty(); }
};

/// Every group of the plan, in order: what the planner puts in Plan::groups. A chain joins a group
/// only when its service names its GPUs (none named: berth cannot tell it is independent) and has a
/// health gate; nothing else (a stop, a write) may sit between two chains. The executor runs each
/// group's starts one after another without waiting, then their gates together.
std::vector<ParallelGroup> ParallelStarts(const Plan& plan);

}  // namespace berth
