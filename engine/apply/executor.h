// The executor: carries out a plan's actions in order through the providers. Every action is
// idempotent (a unit already written, a service already running: nothing happens twice).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/plan.h"
#include "core/status.h"
#include "core/switch_undo.h"
#include "core/turn_seam.h"
#include "engine/output/step_observer.h"
#include "providers/bench/load.h"
#include "providers/front/haproxy_admin.h"

namespace berth {

class SystemdManager;
class UnitFiles;
class HealthProbe;
class JournalReader;
class ModelStore;
class SmokeClient;
class CommandRunner;
class StandbyClient;

/// Reads a prewarm's files into the page cache (providers/host/page_cache.h in production):
/// `progress(done, total)` after each chunk; stops early (Ok) when `stop` is set. Returns the
/// bytes read.
using PrewarmRunner = std::function<Result<uint64_t>(
    const PrewarmStep& step, const std::function<void(uint64_t done, uint64_t total)>& progress,
    const std::atomic<bool>* stop)>;

/// The host's seams: what the executor acts on and asks. The composition root binds the real
/// ones (engine/cli/live_host.cc), tests fakes; HostSeams carries them per pass.
struct ExecutorSeams {
  SystemdManager* systemd = nullptr;
  UnitFiles* unit_files = nullptr;
  HealthProbe* health = nullptr;
  JournalReader* journal = nullptr;  // adds a failing unit's last lines to errors; may be null
  Clock* clock = nullptr;            // null = RealClock()
  ModelStore* models = nullptr;      // downloads and removals of models
  SmokeClient* smoke = nullptr;      // smoke gates; needed only by a plan that has one
  LoadRunner load;                   // throughput floors; likewise
  PrewarmRunner prewarm;             // prewarms; none: a prewarm step says so and goes on
  StandbyClient* standby = nullptr;  // sleeps and wakes; needed only by a plan that has one
  /// What `unit`'s processes hold on each GPU now, as NVML says (GPU index -> bytes): the check
  /// that a sleep freed its GPU memory. Null: not checked (a note says so).
  std::function<Result<std::map<int, uint64_t>>(const std::string& unit)> gpu_held;
  CommandRunner* commands = nullptr;  // preflight commands; needed only by a plan that has one
  /// The fronts (engine/apply/front_steps.h): HAProxy in berth, fakes in tests. Needed only by
  /// a plan with front steps.
  FrontConnector connect_front;
  FrontReloader reload_front;
};

/// How the executor acts where the plan leaves it a choice.
struct ExecutorPolicy {
  bool rollback = true;  // undo a failed replacement
  /// How long a start, stop or restart job may take before berth gives up on it.
  std::chrono::milliseconds job_timeout{std::chrono::minutes(5)};
  /// How long a sleep's GPU memory may take to show as freed in NVML.
  std::chrono::milliseconds gpu_release_timeout{std::chrono::seconds(30)};
  /// The folder of berth's engine-check programs (FindEngineCheckDir): an engine check runs
  /// <this>/<PreflightStep::check_program>. Needed only by a plan that has one.
  std::string engine_check_dir;
  /// The state lineage stamped into every unit file written ("# berth-lineage:"), so that
  /// another state directory takes the unit as foreign. "" writes the content as planned.
  std::string lineage;
};

/// This run's hooks: who is told, what stops it, its fleet turn, what an earlier apply left.
struct RunHooks {
  /// Told of every step, note and download (the journal, the progress lines); none: silent.
  std::vector<StepObserver*> observers;
  /// Called the moment a download is verified and published (from the downloading thread;
  /// several may run at once), so berth records the revision as its own even if it dies next.
  std::function<void(const std::string& repo_id, const std::string& commit)> on_downloaded;
  const std::atomic<bool>* stop = nullptr;  // checked between actions
  /// The fleet's turn: acquired before the first step that takes a service down
  /// (Action::takes_down; once for a side-by-side group holding one), checked before each later
  /// one and acquired again when it was lost, released when the run ends. Not acquired before
  /// the first: the run ends there, nothing went dark (ExecResult::turn_refused); before a later
  /// one: the run ends there (ExecResult::turn_lost). Null: no fleet.
  TurnSeam* turn = nullptr;
  /// What the switches of an interrupted apply replaced (its journal's): a gate of this plan
  /// whose switch began in that apply is undone from here (merged with this plan's, UndoList)
  /// when it fails, as it would have been then. Empty: this plan's switches are all there is.
  std::vector<SwitchUndo> resumed;
  /// Called as each step begins (1-based), once the journal says it runs and before it acts:
  /// the seam a test build injects faults through (berth_faulty kills itself there, as a
  /// kill -9 during that step would). Null in berth.
  std::function<void(int step)> at_step;
};

/// Everything the executor is given: the host's seams, the policy and the run's hooks.
struct ExecutorDeps : ExecutorSeams, ExecutorPolicy, RunHooks {};

/// The outcome of running a plan: how far it got, and why it stopped.
struct ExecResult {
  Status status;
  int failed_step = 0;  // 1-based; 0 when every step succeeded
  int steps_done = 0;
  bool interrupted = false;  // stopped between actions on request (SIGINT/SIGTERM)
  /// before_disruption said no: the steps before the first disruptive one ran, nothing went
  /// dark, and the change is retried (not held).
  bool turn_refused = false;
  /// The fleet's turn was lost after a step took a service down, and taking it again failed:
  /// the run stopped before the next such step (steps_done ran); retried, not held.
  bool turn_lost = false;
  /// A change of a running service failed: what it replaced runs again (the old unit file is
  /// back for an in-place update) and passed its health gate (when berth knows one).
  bool rolled_back = false;
  std::vector<std::string> rollback_log;  // what the rollback did
  /// How long the service the failed change replaced was down, from the step that took it
  /// down until it was healthy again after the rollback (0: no rollback, or not healthy again).
  std::chrono::milliseconds outage{0};
  /// unit -> milliseconds from the beginning of its start or restart to its health gate
  /// passing, for each unit this run saw healthy that way (a rollback's start of the service
  /// it brings back too). What the state records (BerthState::start_times_ms).
  std::map<std::string, uint64_t> start_to_healthy_ms;
  /// unit -> milliseconds its stop step took, for each stop step of the plan that finished
  /// (what the state records: BerthState::stop_times_ms).
  std::map<std::string, uint64_t> stop_ms;
  /// unit -> what its throughput floor measured in this run ("1239.5 output tok/s at ...").
  std::map<std::string, std::string> floor_figures;
  /// unit -> what the reference step of a relative floor measured on it in this run.
  std::map<std::string, std::string> reference_figures;
  /// Every figure a floor gate or a reference step measured in this run, in order, with the
  /// commit and settings of what it measured: what the state records (BerthState::gate_figures).
  std::vector<GateFigures> gate_figures;
  std::vector<std::pair<std::string, std::string>> downloaded;  // repo_id, commit
  uint64_t bytes_downloaded = 0;
};

/// The switches of `plan` (Plan::switches) that have gates or replace something, and what each
/// replaces: the
/// services stopped to make room for it with their gates, its own health gate, and, when it
/// restores its unit (Switch::restores_unit), that unit's file now (`read_unit`: its content,
/// nullopt when there is none). What a journal keeps before the plan runs.
std::vector<SwitchUndo> SwitchesOf(
    const Plan& plan,
    const std::function<std::optional<std::string>(const std::string& unit)>& read_unit);

/// What each switch of a run undoes, as its journal keeps it and its rollbacks read it: the
/// switches an interrupted apply began (`earlier`) whose gates `plan` runs again, what they
/// replaced first, then what this plan's switch adds; then this plan's other switches
/// (SwitchesOf).
std::vector<SwitchUndo> UndoList(
    const Plan& plan, const std::vector<SwitchUndo>& earlier,
    const std::function<std::optional<std::string>(const std::string& unit)>& read_unit);

class Executor {
 public:
  explicit Executor(ExecutorDeps deps);
  ~Executor();
  /// Runs every action in order and stops at the first failure; gives back the fleet's turn
  /// (when it took it) at the end.
  ExecResult Run(const Plan& plan);
  /// One action, by its kind's runner; public for tests.
  Status RunAction(const Action& action, ExecResult* result = nullptr);

 private:
  /// One gate being waited for: its own schedule (quick first probes, then backing off to its
  /// interval) until its deadline.
  struct GateWait {
    std::string unit;
    const HealthStep* gate = nullptr;
    Status status;  // its verdict, once it ended
    bool waiting = true;
    Clock::TimePoint deadline, due;
    std::chrono::milliseconds wait{0}, interval{0};
    std::string last_probe = "no probe made";
    /// systemd's restart count when the gate began: a restart job does not reset it for a unit
    /// that was restarting on its own, so only restarts after this one fail the gate.
    uint32_t base_restarts = 0;
  };
  GateWait BeginGate(const std::string& unit, const HealthStep& gate);
  /// The gate scheduler: probes every gate of `waits` on its own schedule until each passed or
  /// failed, sleeping until the next one is due; `ended(k)` is called the moment waits[k] ends.
  void PollGates(std::vector<GateWait>* waits, const std::function<void(size_t k)>& ended);
  /// One look at a starting service: its unit still up, then one health probe. Ok: healthy;
  /// nullopt: not yet (`last` says what the probe saw); another status: the gate failed.
  std::optional<Status> ProbeOnce(const std::string& unit, const HealthStep& h,
                                  uint32_t base_restarts, std::string* last);

  ExecResult RunSteps(const Plan& plan);  // Run, but for the turn's release

  // The step runners, one per kind of payload.
  Status WaitHealthy(const std::string& unit, const HealthStep& h);
  /// A service's preflight command: it must exit 0 within its timeout; or (reason
  /// kEngineCheck) the engine check.
  Status Preflight(const Action& a, const PreflightStep& p);
  Status EngineCheck(const Action& a, const PreflightStep& p);
  /// The throughput floor: a bounded load, its figures against the floor's limits.
  Status Floor(const std::string& unit, const FloorStep& f, ExecResult* result);
  /// A relative floor's reference: the floor's load on the service a switch replaces, kept in
  /// references_. Never fails: a floor without its reference falls back as its manifest says.
  Status Reference(const std::string& unit, const FloorStep& f, ExecResult* result);
  /// The smoke gate: one request must return non-empty text within its timeout.
  Status Smoke(const std::string& unit, const SmokeStep& g);
  /// The soak gate: the service watched for its duration (restarts, health, the front's 5xx).
  Status Soak(const std::string& unit, const SoakStep& g);
  Status Download(const DownloadStep& d, ExecResult* r);
  Status RemoveModel(const RemoveModelStep& m);
  /// A prewarm: the weights read into the page cache, progress as notes. Never fails: what it
  /// could not read, the start reads from disk.
  Status Prewarm(const Action& a, const PrewarmStep& p);
  /// A standby put to sleep (vLLM's sleep mode), its GPU memory checked freed through NVML;
  /// where the sleep fails or frees too little, the service is stopped instead (what the plan
  /// counted on is the GPU memory, not the sleep), and the undo starts it.
  Status Sleep(const Action& a, const StandbyStep& s);
  /// A sleeping service woken; where the wake fails, restarted cold (its gates follow either
  /// way).
  Status Wake(const Action& a, const StandbyStep& s);
  /// Waits until the server on host:port says it sleeps (or is awake: `asleep` false), bounded
  /// by `timeout_ms`.
  Status AwaitSleeping(const StandbyStep& s, bool asleep);
  Status WriteUnit(const std::string& unit, const UnitFileStep& f);
  Status Front(ActionKind kind, const FrontStep& f);

  /// The observers: a step's state, a note.
  void Tell(const Plan& plan, size_t i, StepState state, const std::string& message = "",
            uint64_t healthy_after_ms = 0);
  void Note(const std::string& line);
  /// The fleet's turn before step `i` (through `to`, a group's last step), when one of them
  /// takes a service down: Ok to go on; else the run ends (`r` says how).
  Status TurnBefore(const Plan& plan, size_t i, size_t to, ExecResult* r);
  /// The steps of a side-by-side group (Plan::groups): every start, then every gate at once,
  /// then the boot actions of the services that passed. Rolls back each one that failed.
  Status RunGroup(const Plan& plan, const ParallelGroup& g, ExecResult* r);
  /// One step with its journal hooks and progress lines (and the at_step seam).
  Status Step(const Plan& plan, size_t i, ExecResult* r);
  Status RunDownloads(const Plan& plan, size_t first, size_t last, ExecResult* r);
  /// Undoes the switch whose start or gate failed at step `failed`: nullopt when it replaced
  /// nothing, else whether what it replaced runs again and passed its gate. What it undoes is
  /// the run's UndoList entry of the switch (or of the interrupted apply's switch whose gate
  /// this is).
  std::optional<bool> Rollback(const Plan& plan, size_t failed, ExecResult* r);
  /// The end of an undo behind a front: the front routes back to what served before the switch
  /// (SwitchUndo::undo_route), or, were that hold, to `serves` ("service/x": a service the undo
  /// saw healthy again). True when there is no front, or the route succeeded.
  bool RouteBack(const SwitchUndo& u, const std::string& serves, ExecResult* r);
  /// After a rollback started `unit` again (at `started`): its health gate, then the outage
  /// since `down`.
  bool BackHealthy(const HealthStep& gate, const std::string& unit, Clock::TimePoint down,
                   Clock::TimePoint started, ExecResult* r);
  /// Records in `r` that `unit`, started at `started`, passed its health gate just now; returns
  /// how long that took.
  uint64_t NoteHealthy(const std::string& unit, Clock::TimePoint started, ExecResult* r);
  std::string JournalTail(const std::string& unit);
  ExecutorDeps d_;
  bool turn_taken_ = false;                     // this run acquired the fleet's turn
  std::vector<SwitchUndo> undo_;                // this run's UndoList
  std::vector<Clock::TimePoint> step_started_;  // when each step began
  std::vector<int> owner_;  // step -> the index of its switch in Plan::switches, or -1
  std::map<std::string, GateFigures> references_;  // unit -> what its kReference measured
  std::set<std::string> stopped_not_slept_;  // units a sleep step stopped instead (its fallback)
};

}  // namespace berth
