#include "engine/apply/reconciler.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>

#include "core/atomic_file.h"
#include "core/log.h"
#include "core/read_file.h"
#include "core/unit_marker.h"
#include "engine/apply/pass_records.h"
#include "engine/apply/saved_plan.h"
#include "engine/output/progress.h"
#include "engine/state/history.h"
#include "engine/state/state.h"
#include "manifests/loader.h"
#include "planners/plan_index.h"
#include "planners/planner.h"
#include "planners/state_only.h"
#include "planners/unit_diff.h"
#include "providers/systemd/systemd_manager.h"
#include "providers/systemd/unit_files.h"

namespace berth {
namespace {

std::string Plural(size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// One pass: the steps in order, each returning false once the pass is over (the report says
// how it ended).
class Pass : StepObserver {
 public:
  Pass(const ReconcilerDeps& d, const ReconcileOptions& o)
      : d_(d), o_(o), say_(*d.reporter), clock_(d.clock ? *d.clock : RealClock()) {}

  RunReport Run() {
    RunSteps();
    // The plan goes into the report once the pass is done with it (moved, not copied: at
    // 10,000 services a copy of the plan was a tenth of a plan's time).
    if (plan_shown_) rep_.plan = std::move(plan_);
    ReportToFleet();
    return std::move(rep_);
  }

 private:
  void RunSteps() {
    if (!LoadInputs() || HostExcluded() || !Connect() || !LoadState() || !Observe() ||
        !MakeOrCheckPlan() || !SavePlan())
      return;
    CountUp(desired_, observed_, &rep_);
    // A plan that still has this held change to make (an apply would refuse it; so would the
    // loop): metrics and status show it held, whichever command made the pass.
    const HeldChange& held = observed_.state.held;
    rep_.change_held = !held.empty() && held.digest == desired_.digest && !plan_.empty();
    if (o_.apply) Learn(observed_);
    if (plan_.blocked())
      return End(Outcome::kBlocked, Status::FailedPrecondition(plan_.problems[0].message), true);
    if (plan_.empty()) {
      CloseUnfinishedJournal();
      return End(Outcome::kNoChanges);
    }
    if (!o_.apply) return End(Outcome::kPlanned);
    if (Held() || !Confirm() || !Execute()) return;
    Converged();
  }

  void End(Outcome o, Status s = Status::Ok(), bool terminal = false) {
    rep_.outcome = o;
    rep_.status = std::move(s);
    rep_.terminal = terminal;
  }
  bool Fail(Outcome o, Status s, bool terminal = false) {
    End(o, std::move(s), terminal);
    return false;
  }
  int64_t MsSince(Clock::TimePoint t0) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - t0).count();
  }
  const char* Verb() const { return o_.apply ? "berth apply" : "berth plan"; }

  // The saved plan (when applying one) and the manifest it names, or the manifest given.
  bool LoadInputs() {
    manifest_path_ = o_.manifest_path;
    if (!o_.saved_plan_path.empty()) {
      // The operator names the file (a link is theirs to follow); it is read as any file berth
      // does not trust: a regular file, bounded, without blocking.
      Result<std::string> text = ReadRegularFile(
          o_.saved_plan_path, {.max_bytes = kMaxSavedPlanBytes, .follow_links = true});
      if (!text.ok()) {
        say_.Error("berth apply: cannot read the saved plan: " + text.status().message());
        return Fail(Outcome::kError, text.status(), true);
      }
      auto sp = SavedPlanFromJson(*text, o_.saved_plan_path);
      if (!sp.ok()) {
        say_.Error("berth apply: " + sp.status().message());
        return Fail(Outcome::kError, sp.status(), true);
      }
      saved_ = std::move(sp).value();
      // The manifest named with -f wins over the one the file names (the file is not trusted;
      // the digest must match either way).
      if (manifest_path_.empty()) manifest_path_ = saved_.manifest_path;
    }
    auto t0 = clock_.Now();
    LoadResult loaded = LoadManifests(manifest_path_, o_.manifest_edit);
    spdlog::debug("loaded the manifests in {} ms", MsSince(t0));
    if (!loaded.ok()) {
      for (const auto& diag : loaded.diagnostics) say_.Error(diag.ToString());
      say_.Error(Plural(loaded.diagnostics.size(), "problem") + " in " + manifest_path_ +
                 "; nothing was planned or changed");
      return Fail(Outcome::kInvalid, Status::InvalidArgument(loaded.diagnostics[0].ToString()),
                  true);
    }
    desired_ = std::move(loaded.desired);
    rep_.manifest_digest = desired_.digest;
    return true;
  }

  // A fleet manifest that excludes this host: say so without locking, connecting or asking the
  // Hub anything.
  bool HostExcluded() {
    if (!d_.hostname) return false;
    Observed just_the_name;
    just_the_name.hostname = d_.hostname();
    Plan skip = MakePlan(desired_, just_the_name);
    if (skip.host_matches) return false;
    rep_.plan = skip;
    say_.ShowPlan(skip, desired_);
    End(Outcome::kNoChanges);
    return true;
  }

  bool Connect() {
    auto seams = d_.connect(desired_);
    if (!seams.ok()) {
      say_.Error("berth: " + seams.status().message());
      return Fail(Outcome::kError, seams.status());
    }
    host_ = *seams;
    if (o_.apply && (!host_.systemd || !host_.unit_files || !host_.models || !host_.health)) {
      Status s =
          Status::Unavailable(host_.systemd_error.empty() ? "this host cannot be changed from here"
                                                          : host_.systemd_error);
      say_.Error("berth: " + s.message());
      return Fail(Outcome::kError, s);
    }
    return true;
  }

  // The lock (when applying) and berth's records: what it created, its last failures, and an
  // apply that stopped half-way.
  bool LoadState() {
    if (o_.state_dir.empty()) {
      if (!o_.apply) return true;  // offline: the observation carries berth's state
      return Fail(Outcome::kError, Status::InvalidArgument("applying needs a state directory"));
    }
    if (o_.apply && !o_.lock_held) {
      auto l = StateLock::Acquire(o_.state_dir, o_.lock_timeout, "berth apply", clock_);
      if (!l.ok()) {
        say_.Error("berth: " + l.status().message());
        return Fail(Outcome::kError, l.status());
      }
      lock_ = std::move(l).value();
      // A berth killed while it wrote its state, journal or history left its temp file.
      for (const std::string& name : RemoveOrphanedTempFiles(o_.state_dir))
        spdlog::info("removed {}/{}, left by a berth killed while it wrote", o_.state_dir, name);
    }
    dir_ = std::make_unique<StateDir>(o_.state_dir);
    auto state = dir_->Load();
    if (!state.ok()) {
      say_.Error("berth: " + state.status().message());
      return Fail(Outcome::kError, state.status(), true);
    }
    state_ = std::move(state).value();
    bool journal_exists = false;
    Result<Journal> journal = dir_->LoadJournal(&journal_exists);
    if (journal_exists && !journal.ok())
      journal_problem_ = journal.status().message() +
                         "; whether an apply stopped half-way is not known (an apply writes a "
                         "new journal)";
    berth_state_ =
        ObservedState(state_, *dir_, lock_ != nullptr || o_.lock_held, &in_progress_, &unfinished_);
    interrupted_ = !unfinished_.finished;
    have_state_ = true;
    return true;
  }

  bool Observe() {
    auto t0 = clock_.Now();
    auto observed = host_.observer->Observe(desired_);
    spdlog::debug("observed the host in {} ms", MsSince(t0));
    if (!observed.ok()) {
      say_.Error("berth: " + observed.status().message() + "; nothing was changed");
      return Fail(Outcome::kError, observed.status());
    }
    observed_ = std::move(observed).value();
    if (have_state_) observed_.state = berth_state_;
    if (!journal_problem_.empty()) observed_.warnings.push_back(journal_problem_);
    if (!in_progress_.empty())
      observed_.warnings.push_back("an apply is running now (" + in_progress_ +
                                   "): this plan shows the host in the middle of that change");
    return true;
  }

  bool MakeOrCheckPlan() {
    auto t0 = clock_.Now();
    if (o_.saved_plan_path.empty()) {
      plan_ = MakePlan(desired_, observed_, PlanOpts());
      spdlog::debug("made the plan of {} actions in {} ms", plan_.actions.size(), MsSince(t0));
    } else {
      std::vector<std::string> why =
          StaleReasons(saved_, desired_.digest, state_.lineage, state_.serial, observed_,
                       static_cast<int64_t>(clock_.UnixNow()), o_.max_age_s);
      if (!why.empty()) {
        say_.Error("berth apply: refusing " + o_.saved_plan_path +
                   ", made for a host that has changed:");
        for (const auto& w : why) say_.Error("  - " + w);
        say_.Error("Nothing was changed. Make and review a new plan: berth plan -f " +
                   manifest_path_ + " --out " + o_.saved_plan_path);
        return Fail(Outcome::kStale, Status::FailedPrecondition(why[0]));
      }
      // The file is not trusted: what runs is the plan berth makes now, and only when it is the
      // one that was saved (and reviewed), action for action.
      plan_ = MakePlan(desired_, observed_, PlanOpts());
      std::vector<std::string> differ = PlanDifferences(saved_.plan, plan_);
      if (!differ.empty()) {
        say_.Error("berth apply: refusing " + o_.saved_plan_path +
                   ": it is not the plan berth makes now for this manifest and host:");
        for (const auto& w : differ) say_.Error("  - " + w);
        say_.Error(
            "Nothing was changed. If the file was edited, it cannot run; make and review "
            "a new plan: berth plan -f " +
            manifest_path_ + " --out " + o_.saved_plan_path);
        return Fail(Outcome::kStale, Status::FailedPrecondition(differ[0]));
      }
      std::vector<std::string> unchecked = MissingFingerprints(saved_);
      if (!unchecked.empty()) {
        say_.Error("berth apply: refusing " + o_.saved_plan_path + ":");
        for (const auto& w : unchecked) say_.Error("  - " + w);
        say_.Error("Nothing was changed. Make and review a new plan: berth plan -f " +
                   manifest_path_ + " --out " + o_.saved_plan_path);
        return Fail(Outcome::kStale, Status::FailedPrecondition(unchecked[0]));
      }
    }
    plan_shown_ = true;
    t0 = clock_.Now();
    say_.ShowPlan(plan_, desired_);
    spdlog::debug("showed the plan in {} ms", MsSince(t0));
    return true;
  }

  bool SavePlan() {
    if (o_.out_path.empty()) return true;
    SavedPlan s = MakeSavedPlan(plan_, desired_, observed_, manifest_path_,
                                static_cast<int64_t>(clock_.UnixNow()));
    std::ofstream f(o_.out_path, std::ios::trunc);
    f << SavedPlanToJson(s);
    f.close();
    if (!f) {
      say_.Error("berth plan: cannot write " + o_.out_path);
      return Fail(Outcome::kError, Status::IoError(o_.out_path));
    }
    say_.Info("\nSaved to " + o_.out_path + "; carry it out with: berth apply " + o_.out_path);
    return true;
  }

  // An apply that finds nothing to do, after one that was interrupted: the observation shows
  // nothing is left of that change (its gates, too, passed or are no longer wanted), so its
  // journal is closed and later plans stop warning of it.
  void CloseUnfinishedJournal() {
    if (!o_.apply || !(lock_ || o_.lock_held) || !interrupted_) return;
    Status s = dir_->ClearJournal();
    if (!s.ok()) {
      spdlog::warn("could not close the journal of the interrupted apply: {}", s.message());
      return;
    }
    interrupted_ = false;
    say_.Info("The interrupted apply (started " + unfinished_.started + " by pid " +
              unfinished_.pid + ") left nothing to do; its journal is closed.");
  }

  // Whether this change is held: it failed after something went dark, and is not tried again on
  // its own (the loop, or a cron'd apply, would stop the healthy old service once per retry).
  bool Held() {
    const HeldChange& h = state_.held;
    if (h.empty() || h.digest != desired_.digest || o_.retry) return false;
    std::string why = "the last apply of this manifest failed on " + h.address + " at " + h.time +
                      " after taking a service down (" + h.message + ")";
    say_.Error("berth apply: not trying this change again: " + why + ".");
    say_.Error(
        "Nothing was changed. Fix the cause and change the manifest, or run it once more with: "
        "berth apply -f " +
        manifest_path_ + " --retry");
    End(Outcome::kHeld, Status::FailedPrecondition(why), true);
    return true;
  }

  bool Confirm() {
    if (o_.yes) return true;
    say_.progress() << "\nApply these " << plan_.actions.size()
                    << " actions? Only 'yes' is accepted: " << std::flush;
    std::string answer;
    if (o_.confirm) std::getline(*o_.confirm, answer);
    if (answer == "yes") return true;
    say_.Error("berth apply: not confirmed; nothing was changed");
    return Fail(Outcome::kNotConfirmed, Status::FailedPrecondition("not confirmed"));
  }

  // Runs the plan with a journal, then records what changed in berth's state.
  bool Execute() {
    if (!StartLineage() || !KeepAdoptedUnits() || !WriteJournal()) return false;
    std::string started = NowRfc3339(clock_);
    Clock::TimePoint began = clock_.Now();
    const ExecResult& ex = rep_.exec = RunPlan();  // gives back the fleet's turn when it ends
    RecordApply(ex);
    RecordHistory(started, began, ex);
    return Applied(ex);
  }

  // The lineage is born with the first apply (a plan writes nothing), before any unit file is
  // stamped with it.
  bool StartLineage() {
    if (!state_.lineage.empty()) return true;
    state_.lineage = NewLineage();
    Status s = dir_->Save(state_);
    if (s.ok()) return true;
    say_.Error("berth apply: " + s.message() + "; nothing was changed");
    return Fail(Outcome::kError, s);
  }

  // What the interrupted apply's switches replaced, when this one resumes it.
  std::vector<SwitchUndo> Resumed() const {
    return interrupted_ ? unfinished_.switches : std::vector<SwitchUndo>{};
  }

  // The journal, before anything changes: every step pending, and what each switch replaces,
  // kept before anything is replaced (a run that resumes its gates after a kill -9 undoes it
  // from here if one fails).
  bool WriteJournal() {
    journal_.started = NowRfc3339(clock_);
    journal_.pid = std::to_string(::getpid());
    journal_.manifest_digest = desired_.digest;
    for (size_t i = 0; i < plan_.actions.size(); ++i)
      journal_.entries.push_back({static_cast<int>(i + 1), ActionKindName(plan_.actions[i].kind),
                                  plan_.actions[i].address, "pending", ""});
    journal_.switches =
        UndoList(plan_, Resumed(), [&](const std::string& unit) -> std::optional<std::string> {
          auto content = host_.unit_files->Read(unit);
          return content.ok() ? *content : std::nullopt;
        });
    Status s = dir_->SaveJournal(journal_);
    if (s.ok()) return true;
    say_.Error("berth apply: " + s.message() + "; nothing was changed");
    return Fail(Outcome::kError, s);
  }

  ExecResult RunPlan() {
    ExecutorDeps deps;
    static_cast<ExecutorSeams&>(deps) = host_;
    deps.engine_check_dir = d_.engine_check_dir.value_or("");
    deps.lineage = state_.lineage;
    deps.clock = &clock_;
    ProgressLines progress(say_.progress(), say_.tty());
    deps.observers = {this, &progress};
    // A model revision the run downloaded: recorded as berth's (State::models).
    deps.on_downloaded = [this](const std::string& repo, const std::string& commit) {
      std::lock_guard<std::mutex> hold(recording_);
      auto& commits = state_.models[repo];
      if (std::find(commits.begin(), commits.end(), commit) != commits.end()) return;
      commits.push_back(commit);
      Status s = dir_->Save(state_);
      if (!s.ok()) spdlog::warn("could not record {}@{} as berth's: {}", repo, commit, s.message());
    };
    deps.stop = o_.stop;
    deps.resumed = Resumed();
    deps.at_step = d_.at_step;
    deps.turn = Fleet();
    return Executor(deps).Run(plan_);
  }

  // The journal: each step's state as it changes, and what the state records the moment it is
  // done (a start, a unit rewritten).
  void OnStep(const StepEvent& e) override {
    const Action& a = *e.action;
    journal_.entries[static_cast<size_t>(e.step - 1)].status = StepStateName(e.state);
    journal_.entries[static_cast<size_t>(e.step - 1)].message = e.message;
    (void)dir_->SaveJournal(journal_);  // best effort: the host is observed afresh anyway
    if (e.state != StepState::kDone) return;
    std::lock_guard<std::mutex> hold(recording_);
    bool noted = false;
    if (a.kind == ActionKind::kStart || a.kind == ActionKind::kRestart) noted = NoteStarted(a.unit);
    if (a.kind == ActionKind::kWriteUnit && !StartsOrStops(a.unit))
      noted = NoteRewritten(a.unit, a.As<UnitFileStep>().content);
    if (noted) (void)dir_->Save(state_);
  }

  // What the run changed, in berth's state; the journal is closed, or kept for the next run
  // when this one was interrupted.
  void RecordApply(const ExecResult& ex) {
    Record(plan_, journal_, ex, &state_);
    state_.serial++;
    state_.manifest_digest = desired_.digest;
    state_.manifest_git_commit = GitCommitOf(manifest_path_);
    state_.last_apply = NowRfc3339(clock_);
    if (ex.status.ok()) {
      state_.failures.clear();
      state_.held = {};
    } else if (ex.failed_step > 0 && !ex.interrupted) {
      size_t failed = static_cast<size_t>(ex.failed_step - 1);
      const Action& a = plan_.actions[failed];
      state_.failures[a.address] = {NowRfc3339(clock_), ex.status.message()};
      if (FailureHoldsTheChange(plan_, failed))
        state_.held = {desired_.digest, NowRfc3339(clock_), a.address, ex.status.message()};
    }
    Status s = dir_->Save(state_);
    if (!s.ok()) say_.Error("berth apply: could not record the state: " + s.message());
    rep_.change_held = state_.held.digest == desired_.digest;  // a success clears it
    journal_.finished = !ex.interrupted;
    if (journal_.finished)
      (void)dir_->ClearJournal();
    else
      (void)dir_->SaveJournal(journal_);
  }

  // Whether the run applied the whole plan; when not, says how it ended and ends the pass so.
  bool Applied(const ExecResult& ex) {
    if (ex.status.ok()) return true;
    say_.Error("berth apply: " + ex.status.message());
    if (ex.interrupted) return Fail(Outcome::kInterrupted, ex.status);
    std::string done = std::to_string(ex.steps_done) + " of " +
                       std::to_string(plan_.actions.size()) + " steps were done";
    if (ex.turn_refused || ex.turn_lost) {
      say_.Error(done + (ex.turn_refused ? " (none took a service down)" : "") +
                 "; berth plan shows what is left");
      return Fail(Outcome::kError, ex.status);
    }
    if (!ex.rollback_log.empty()) {
      say_.Error(ex.rolled_back ? "rolled back:" : "rollback incomplete:");
      for (const auto& l : ex.rollback_log) say_.Error("  " + l);
    }
    say_.Error(done + "; berth plan shows what is left");
    // Held (it failed after taking a service down): the loop waits for the manifest to change.
    bool terminal = ex.status.code() == Status::Code::kPermissionDenied || rep_.change_held;
    return Fail(Outcome::kFailed, ex.status, terminal);
  }

  // One entry in history.json (berth history): when, which manifest, what, how it ended.
  void RecordHistory(const std::string& started, Clock::TimePoint began, const ExecResult& ex) {
    HistoryEntry e;
    e.started = started;
    e.duration_ms = static_cast<uint64_t>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - began).count()));
    e.manifest_digest = desired_.digest;
    e.manifest_git_commit = state_.manifest_git_commit;
    e.outcome = ex.interrupted ? "interrupted" : ex.status.ok() ? "applied" : "failed";
    e.message = ex.status.ok() ? "" : ex.status.message();
    for (const Action& a : plan_.actions)
      e.actions.push_back(std::string(ActionKindName(a.kind)) + " " + a.address);
    e.steps_done = ex.steps_done;
    e.rolled_back = ex.rolled_back;
    for (const GateFigures& g : ex.gate_figures)
      e.gates.push_back(g.source + " " + g.unit + ": " + GateFiguresText(g));
    Status s = AppendHistory(dir_->dir(), e);
    if (!s.ok()) spdlog::warn("could not record this apply in the history: {}", s.message());
  }

  // Remembers what the running state-only services hold (their ports and GPU memory), so that
  // berth still knows them once they are stopped, and how long the starts that requests made of
  // on-demand servers took (systemd timed them; berth times its own). Applying only: a plan
  // writes nothing.
  void Learn(const Observed& observed) {
    if (!dir_) return;
    const bool learned = LearnStateOnly(desired_, observed, &state_.learned);
    const bool timed = RecordRequestStarts(desired_, observed, &state_);
    if (!learned && !timed) return;
    if (state_.lineage.empty()) state_.lineage = NewLineage();  // born with the first write
    Status s = dir_->Save(state_);
    if (!s.ok())
      spdlog::warn(
          "could not record what the state-only services hold and the on-demand "
          "servers' starts took: {}",
          s.message());
  }

  // A unit berth adopts (adopt: true) was someone else's file: a copy goes to the state
  // directory (adopted/<unit>.<time>) before anything is written, or nothing is.
  bool KeepAdoptedUnits() {
    for (const Action& a : plan_.actions) {
      if (a.kind != ActionKind::kWriteUnit || !a.As<UnitFileStep>().adopts) continue;
      auto content = host_.unit_files->Read(a.unit);
      Status s = content.ok() ? Status::Ok() : content.status();
      std::string path = o_.state_dir + "/adopted/" + a.unit + "." + NowRfc3339(clock_);
      if (s.ok() && content->has_value()) {
        std::error_code ec;
        std::filesystem::create_directories(o_.state_dir + "/adopted", ec);
        s = ec ? Status::IoError(o_.state_dir + "/adopted: " + ec.message())
               : WriteFileAtomically(path, **content);
      }
      if (!s.ok()) {
        say_.Error("berth apply: cannot keep a copy of " + a.unit +
                   " before adopting it: " + s.message() + "; nothing was changed");
        return Fail(Outcome::kError, s);
      }
      say_.Info("kept a copy of " + a.unit + " (adopted) in " + path);
    }
    return true;
  }

  // Which invocation of `unit` berth just started, with the settings it started with
  // (RestartDigest): a later plan restarts a process of that invocation once a setting it runs
  // with has changed in the file (a kill -9 between a unit write and its restart leaves exactly
  // that), and only reloads systemd when a reload-only setting changed.
  bool NoteStarted(const std::string& unit) {
    auto props = host_.systemd->GetUnits({unit});
    auto content = host_.unit_files->Read(unit);
    if (!props.ok() || props->empty() || (*props)[0].invocation_id.empty() || !content.ok() ||
        !content->has_value() || !IsBerthUnit(**content))
      return false;
    state_.started[unit] = {(*props)[0].invocation_id, RestartDigest(**content)};
    return true;
  }

  // Whether the plan starts, restarts or stops `unit`.
  bool StartsOrStops(const std::string& unit) const {
    return std::any_of(plan_.actions.begin(), plan_.actions.end(), [&](const Action& a) {
      return a.unit == unit && (a.kind == ActionKind::kStart || a.kind == ActionKind::kRestart ||
                                a.kind == ActionKind::kStop || a.kind == ActionKind::kSleep ||
                                a.kind == ActionKind::kWake);
    });
  }

  // A unit file rewritten under a process berth started, which the plan leaves running (only
  // settings systemd reads changed, or the process already ran the new ones): it now runs what
  // the new file says, and a later plan must not take it for a process of an older unit (the
  // record of an older berth, a spec hash, would say so).
  bool NoteRewritten(const std::string& unit, const std::string& content) {
    auto it = state_.started.find(unit);
    if (it == state_.started.end()) return false;
    auto props = host_.systemd->GetUnits({unit});
    if (!props.ok() || props->empty() || (*props)[0].invocation_id != it->second.first)
      return false;
    it->second.second = RestartDigest(content);
    return true;
  }

  // After an apply: observe again; the plan from there must be empty.
  void Converged() {
    auto after = host_.observer->Observe(desired_);
    if (!after.ok()) {
      say_.Error("berth apply: applied, but observing the host again failed: " +
                 after.status().message());
      return End(Outcome::kError, after.status());
    }
    Learn(*after);
    after->state = state_.ToObserved();
    CountUp(desired_, *after, &rep_);
    Plan left = MakePlan(desired_, *after, PlanOpts());
    if (!left.empty()) {
      std::ostringstream text;
      Reporter(text, text).ShowPlan(left, desired_);
      say_.Error("berth apply: applied, but the host has not converged; what is left:\n" +
                 text.str());
      return End(Outcome::kError, Status::Unavailable("not converged"));
    }
    say_.Info("applied " + Plural(plan_.actions.size(), "action") +
              "; the host matches the manifests");
    return End(Outcome::kApplied);
  }

  // The fleet of a manifest with `fleet:`, made on first use; null without one.
  FleetPass* Fleet() {
    if (!desired_.fleet.enabled()) return nullptr;
    if (!fleet_) {
      FleetTurnOptions fo;
      fo.host = d_.hostname ? d_.hostname() : "";
      fo.digest = desired_.digest;
      fo.clock = &clock_;
      fo.stop = o_.stop;
      fo.poll = d_.fleet_poll;
      fo.services_up = rep_.services_up;
      fo.services_wanted = rep_.services_wanted;
      fo.say = [this](const std::string& line) { say_.progress() << line << std::endl; };
      fleet_ = std::make_unique<FleetPass>(desired_.fleet, d_.connect_etcd, fo);
    }
    return fleet_.get();
  }

  // An apply of a fleet's manifest tells the fleet where this host stands, every pass: the next
  // wave starts once its predecessors report converged, and a failure stops the rollout.
  void ReportToFleet() {
    if (!o_.apply || !rep_.plan.host_matches || !Fleet()) return;
    FleetReport r;
    r.message = rep_.status.ok() ? "" : rep_.status.message();
    switch (rep_.outcome) {
      case Outcome::kNoChanges:
      case Outcome::kApplied:
        r.state = rep_.crash_looping.empty() ? kFleetConverged : kFleetCrashLooping;
        r.message = CrashLoopSummary(rep_);
        break;
      case Outcome::kHeld:
        r.state = kFleetFailed;
        break;
      case Outcome::kFailed:
        r.state = state_.held.digest == desired_.digest ? kFleetFailed : kFleetError;
        break;
      case Outcome::kBlocked:
        r.state = kFleetBlocked;
        break;
      default:
        r.state = rep_.exec.turn_refused ? kFleetWaiting : kFleetError;
    }
    r.services_up = rep_.services_up;
    r.services_wanted = rep_.services_wanted;
    r.start_to_healthy_ms = rep_.exec.start_to_healthy_ms;
    r.floor_figures = rep_.exec.floor_figures;
    r.reference_figures = rep_.exec.reference_figures;
    fleet_->Publish(r);
  }

  PlanOptions PlanOpts() const {
    PlanOptions p;
    p.engine_check_dir = d_.engine_check_dir;
    if (d_.berth_executable) p.berth_executable = *d_.berth_executable;
    return p;
  }

  const ReconcilerDeps& d_;
  const ReconcileOptions& o_;
  Reporter& say_;
  Clock& clock_;
  RunReport rep_;
  bool plan_shown_ = false;  // plan_ becomes the report's plan when the pass ends
  std::string manifest_path_;
  SavedPlan saved_;
  Desired desired_;
  HostSeams host_;
  std::unique_ptr<StateLock> lock_;
  std::unique_ptr<StateDir> dir_;
  State state_;
  BerthState berth_state_;
  bool have_state_ = false;
  std::string in_progress_;      // who applies right now, when planning without the lock
  std::string journal_problem_;  // why journal.json cannot be read, when it cannot
  Journal unfinished_;           // the journal of an interrupted apply, when interrupted_
  bool interrupted_ = false;     // an apply stopped half-way (its journal is unfinished_)
  Observed observed_;
  Plan plan_;
  Journal journal_;       // of this apply, once it runs
  std::mutex recording_;  // state_, written by the run's steps and its downloads
  std::unique_ptr<FleetPass> fleet_;
};

}  // namespace

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kNoChanges:
      return "no_changes";
    case Outcome::kApplied:
      return "applied";
    case Outcome::kPlanned:
      return "planned";
    case Outcome::kBlocked:
      return "blocked";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kInvalid:
      return "invalid_manifest";
    case Outcome::kError:
      return "error";
    case Outcome::kNotConfirmed:
      return "not_confirmed";
    case Outcome::kStale:
      return "stale_plan";
    case Outcome::kInterrupted:
      return "interrupted";
    case Outcome::kHeld:
      return "held";
  }
  return "?";
}

std::string CrashLoopSummary(const RunReport& report) {
  std::string out;
  for (const auto& [name, detail] : report.crash_looping)
    out += (out.empty() ? "crash-looping: " : "; ") + name + " (" + detail + ")";
  return out;
}

std::string DefaultStateDir() {
  const char* d = std::getenv("BERTH_STATE_DIR");
  return d && *d ? d : "/var/lib/berth";
}

Reconciler::Reconciler(ReconcilerDeps deps) : d_(std::move(deps)) {}

RunReport Reconciler::Run(const ReconcileOptions& options) { return Pass(d_, options).Run(); }

}  // namespace berth
