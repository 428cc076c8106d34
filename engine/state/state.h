// berth's own records on a host (the state directory, /var/lib/berth by default):
//   state.json   lineage, serial, what berth created (only that is ever pruned), the spec last
//                applied per resource, the manifest's digest and git commit, the last failures;
//   journal.json the apply in flight: each action before and after it runs;
//   lock         one apply or reconcile at a time, with who holds it.
// Every write is atomic (temp file, fsync, rename).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/observed.h"
#include "core/plan.h"
#include "core/status.h"
#include "core/switch_undo.h"

namespace berth {

/// The most berth reads of a file of its state directory (state.json, journal.json,
/// history.json, bench.json): far more than it writes there (200 applies of history are a few
/// MB); a bigger file there is not berth's.
inline constexpr uint64_t kMaxStateFileBytes = uint64_t{64} << 20;

struct State {
  static constexpr int kFormatVersion = 1;
  std::string lineage;             // random, set once when the state is created
  uint64_t serial = 0;             // +1 on every apply that changed something
  std::vector<std::string> units;  // unit names berth wrote
  std::map<std::string, std::vector<std::string>> models;  // repo_id -> commits berth downloaded
  std::map<std::string, std::string> applied;  // address -> spec hash or commit last applied
  std::string manifest_digest;
  std::string manifest_git_commit;          // when the manifest lives in a git work tree
  std::string last_apply;                   // RFC 3339
  std::map<std::string, Failure> failures;  // address -> the last failure (cleared on success)
  /// unit -> [invocation id, what it started with] of berth's last start or restart of it:
  /// RestartDigest of its unit file ("restart-keys:<sha256>"), or, written by an older berth, the
  /// file's spec hash.
  std::map<std::string, std::pair<std::string, std::string>> started;
  /// A change that failed after something went dark: not retried until the manifest changes.
  HeldChange held;
  /// unit -> the ports and GPU memory a state-only service held when berth last saw it run.
  std::map<std::string, LearnedService> learned;
  /// unit -> its last start-to-healthy times in milliseconds (BerthState::start_times_ms).
  std::map<std::string, std::vector<uint64_t>> start_times_ms;
  /// unit -> the invocation whose start, made by a request and timed by systemd, was last added
  /// to start_times_ms (BerthState::start_invocations): one per unit.
  std::map<std::string, std::string> start_invocations;
  /// unit -> its last stop times in milliseconds (BerthState::stop_times_ms).
  std::map<std::string, std::vector<uint64_t>> stop_times_ms;
  /// unit -> its floor gates' and references' figures (BerthState::gate_figures).
  std::map<std::string, std::vector<GateFigures>> gate_figures;

  /// Adds one start of `unit` that took `ms` to pass its health gate, keeping the last
  /// BerthState::kStartTimesKept.
  void RecordStartTime(const std::string& unit, uint64_t ms);
  /// Adds the last start of `u` as systemd timed it, when berth's start times lack it
  /// (UnrecordedStart: a start a request made), once per invocation. True when it added it.
  bool RecordObservedStart(const ObservedUnit& u);
  /// Adds one stop of `unit` that took `ms`, keeping the last BerthState::kStartTimesKept.
  void RecordStopTime(const std::string& unit, uint64_t ms);
  /// The part the planner sees (Observed::state).
  BerthState ToObserved() const;
};

/// A new lineage: 32 random lowercase hex digits, stamped into every unit file this state's
/// applies write (a unit of another lineage is not this state's to change or prune).
std::string NewLineage();

std::string StateToJson(const State& s);
Result<State> StateFromJson(const std::string& text, const std::string& source);

/// The journal of the apply in flight.
struct JournalEntry {
  int step = 0;
  std::string kind;
  std::string address;
  std::string status;  // pending | running | done | failed | rolled-back
  std::string message;
};
struct Journal {
  std::string started;  // RFC 3339
  std::string pid;
  std::string manifest_digest;
  std::vector<JournalEntry> entries;
  /// What each switch of the plan replaced (its stops, its unit file before), written before the
  /// first step runs: a run that resumes an interrupted switch's gates undoes it from here when
  /// one fails (ExecutorDeps::resumed).
  std::vector<SwitchUndo> switches;
  bool finished = false;
};
std::string JournalToJson(const Journal& j);
Result<Journal> JournalFromJson(const std::string& text, const std::string& source);

/// What an apply that did not finish leaves for the next plan: where it stopped and which
/// services it started without seeing them through every gate of their switch: a health,
/// smoke or floor gate not done (BerthState::interrupted and ::ungated).
void NoteUnfinishedApply(const Journal& journal, BerthState* state);

/// The state directory.
class StateDir {
 public:
  explicit StateDir(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  /// The state, or a fresh one (new lineage, serial 0) when none exists yet.
  Result<State> Load() const;
  Status Save(const State& s) const;
  /// The journal of an apply that did not finish, if any.
  Result<Journal> LoadJournal(bool* exists) const;
  Status SaveJournal(const Journal& j) const;
  Status ClearJournal() const;

 private:
  std::string dir_;
};

/// An exclusive lock on the state directory (flock), with the holder's pid, host and start time
/// written inside so that whoever waits can be told.
class StateLock {
 public:
  ~StateLock();
  /// Waits up to `timeout` (0: do not wait), looking every 100 ms on `clock`. The error names
  /// the holder.
  static Result<std::unique_ptr<StateLock>> Acquire(const std::string& dir,
                                                    std::chrono::milliseconds timeout,
                                                    const std::string& purpose, Clock& clock);

 private:
  int fd_ = -1;
};

/// berth's records as the planner sees them: `state`, with where an unfinished apply (its
/// journal in `dir`) stopped. Without the lock (`lock_held` false: a plan) the journal may be
/// that of an apply still running; then it is not taken as interrupted, and `in_progress` (when
/// given) says who runs it ("pid 4242, started <time>"). `unfinished` (when given) receives the
/// journal of the interrupted apply, or an empty one with `finished` true when there is none.
BerthState ObservedState(const State& state, const StateDir& dir, bool lock_held,
                         std::string* in_progress = nullptr, Journal* unfinished = nullptr);

/// `clock`'s wall time as RFC 3339 UTC: every timestamp berth records goes through the Clock
/// seam, so tests fix it.
std::string NowRfc3339(Clock& clock);
/// The git commit of the work tree holding `path`, "" when it is not in one.
std::string GitCommitOf(const std::string& path);

}  // namespace berth
