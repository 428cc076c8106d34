#include "engine/apply/run_once.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

#include "engine/apply/saved_plan.h"
#include "engine/core/log.h"
#include "engine/core/unit_marker.h"
#include "engine/observe/live_observer.h"
#include "engine/output/plan_output.h"
#include "engine/state/state.h"
#include "manifests/loader.h"
#include "planners/planner.h"
#include "providers/health/health_probe.h"

namespace berth {
namespace {

RunReport Done(RunReport r, Outcome o, int code, Status s = Status::Ok(), bool terminal = false) {
  r.outcome = o;
  r.exit_code = code;
  r.status = std::move(s);
  r.terminal = terminal;
  return r;
}

// What the state learns from the actions that ran.
void Record(const Plan& plan, const Journal& journal, const ExecResult& exec, State* st) {
  for (const JournalEntry& e : journal.entries) {
    if (e.status != "done") continue;
    const Action& a = plan.actions[static_cast<size_t>(e.step - 1)];
    switch (a.kind) {
      case ActionKind::kWriteUnit:
        if (std::find(st->units.begin(), st->units.end(), a.unit) == st->units.end())
          st->units.push_back(a.unit);
        st->applied[a.address] = UnitSpecHash(a.unit_content);
        break;
      case ActionKind::kRemoveUnit:
        st->units.erase(std::remove(st->units.begin(), st->units.end(), a.unit), st->units.end());
        st->applied.erase("unit/" + a.unit);
        break;
      case ActionKind::kRemoveModel: {
        auto& commits = st->models[a.repo_id];
        commits.erase(std::remove(commits.begin(), commits.end(), a.commit), commits.end());
        if (commits.empty()) st->models.erase(a.repo_id);
        break;
      }
      default:
        break;
    }
  }
  for (const auto& [repo, commit] : exec.downloaded) {
    auto& commits = st->models[repo];
    if (std::find(commits.begin(), commits.end(), commit) == commits.end())
      commits.push_back(commit);
  }
  for (const Action& a : plan.actions)
    if (a.kind == ActionKind::kDownload && !a.commit.empty()) st->applied[a.address] = a.commit;
}

int CountUp(const Desired& d, const Observed& o, int* wanted) {
  int up = 0;
  *wanted = 0;
  for (const auto& [n, s] : d.services) {
    if (s.state != ServiceState::kRunning) continue;
    ++*wanted;
    const ObservedUnit* u = o.FindUnit(s.UnitName());
    if (u && u->IsActive()) ++up;
  }
  return up;
}

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
  }
  return "?";
}

std::string DefaultStateDir() {
  const char* d = std::getenv("BERTH_STATE_DIR");
  return d && *d ? d : "/var/lib/berth";
}

RunReport RunOnce(const RunOptions& opt, std::ostream& out, std::ostream& err) {
  RunReport rep;
  std::string state_dir = opt.state_dir.empty() ? DefaultStateDir() : opt.state_dir;

  // A saved plan names its manifest; it must still be the one it was made from.
  SavedPlan saved;
  std::string manifest_path = opt.manifest_path;
  if (!opt.saved_plan_path.empty()) {
    std::ifstream in(opt.saved_plan_path);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) {
      err << "berth apply: cannot read " << opt.saved_plan_path << "\n";
      return Done(rep, Outcome::kError, 1, Status::NotFound(opt.saved_plan_path), true);
    }
    auto sp = SavedPlanFromJson(text.str(), opt.saved_plan_path);
    if (!sp.ok()) {
      err << "berth apply: " << sp.status().message() << "\n";
      return Done(rep, Outcome::kError, 1, sp.status(), true);
    }
    saved = std::move(sp).value();
    manifest_path = saved.manifest_path;
  }

  LoadResult loaded = LoadManifests(manifest_path);
  if (!loaded.ok()) {
    for (const auto& d : loaded.diagnostics) err << d.ToString() << "\n";
    err << loaded.diagnostics.size() << " problem" << (loaded.diagnostics.size() == 1 ? "" : "s")
        << " in " << manifest_path << "; nothing was planned or changed\n";
    return Done(rep, Outcome::kInvalid, 1,
                Status::InvalidArgument(loaded.diagnostics[0].ToString()), true);
  }
  const Desired& desired = loaded.desired;
  rep.manifest_digest = desired.digest;

  // A fleet manifest that excludes this host: say so without locking, connecting or asking
  // the Hub anything.
  {
    Observed just_the_name;
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    just_the_name.hostname = name;
    Plan skip = MakePlan(desired, just_the_name);
    if (!skip.host_matches) {
      rep.plan = skip;
      out << PlanToText(skip, desired);
      return Done(rep, Outcome::kNoChanges, 0);
    }
  }

  std::unique_ptr<StateLock> lock;
  if (opt.apply) {
    auto l = StateLock::Acquire(state_dir, opt.lock_timeout, "berth apply");
    if (!l.ok()) {
      err << "berth: " << l.status().message() << "\n";
      return Done(rep, Outcome::kError, 1, l.status());
    }
    lock = std::move(l).value();
  }
  StateDir sd(state_dir);
  auto state = sd.Load();
  if (!state.ok()) {
    err << "berth: " << state.status().message() << "\n";
    return Done(rep, Outcome::kError, 1, state.status(), true);
  }
  std::vector<std::string> ungated;  // services an interrupted apply started but never saw healthy
  if (opt.apply) {
    bool exists = false;
    auto journal = sd.LoadJournal(&exists);
    if (exists && journal.ok() && !journal->finished) {
      for (const auto& e : journal->entries)
        if (e.kind == "wait-healthy" && e.status != "done") ungated.push_back(e.address);
      std::string where = "before its first action";
      for (const auto& e : journal->entries)
        if (e.status == "running" || e.status == "done")
          where = "at step " + std::to_string(e.step) + " (" + e.kind + " " + e.address + ", " +
                  e.status + ")";
      out << "An apply started " << journal->started << " by pid " << journal->pid << " stopped "
          << where << "; this run looks at the host afresh and finishes the "
          << "change.\n\n";
    }
  }

  LiveHost host;
  Status connected = host.Connect(opt.host, desired);
  if (!connected.ok() && opt.apply) {
    err << "berth: " << connected.message() << "\n";
    return Done(rep, Outcome::kError, 1, connected);
  }
  auto t_observe = std::chrono::steady_clock::now();
  auto observed = host.Observe(desired, state->ToObserved());
  spdlog::debug("observed the host in {} ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  std::chrono::steady_clock::now() - t_observe)
                                                  .count());
  if (!observed.ok()) {
    err << "berth: " << observed.status().message() << "; nothing was changed\n";
    return Done(rep, Outcome::kError, 1, observed.status());
  }
  for (const auto& [address, f] : state->failures)
    observed->warnings.push_back("last apply failed on " + address + " at " + f.time + ": " +
                                 f.message);

  Plan plan;
  if (!opt.saved_plan_path.empty()) {
    std::vector<std::string> why =
        StaleReasons(saved, desired.digest, state->lineage, state->serial, *observed,
                     static_cast<int64_t>(std::time(nullptr)), opt.max_age_s);
    if (!why.empty()) {
      err << "berth apply: refusing " << opt.saved_plan_path << ", made for a host that has "
          << "changed:\n";
      for (const auto& w : why) err << "  - " << w << "\n";
      err << "Nothing was changed. Make and review a new plan: berth plan -f " << manifest_path
          << " --out " << opt.saved_plan_path << "\n";
      return Done(rep, Outcome::kStale, 5, Status::FailedPrecondition(why[0]));
    }
    plan = saved.plan;
    plan.host = observed->hostname;
  } else {
    plan = MakePlan(desired, *observed);
    // A service started by an apply that died before its health gate: gate it now.
    for (const std::string& address : ungated) {
      bool gated = std::any_of(plan.actions.begin(), plan.actions.end(), [&](const Action& a) {
        return a.kind == ActionKind::kWaitHealthy && a.address == address;
      });
      auto it = desired.services.find(address.substr(address.find('/') + 1));
      if (gated || plan.blocked() || it == desired.services.end()) continue;
      const ServiceSpec& s = it->second;
      if (s.state != ServiceState::kRunning || !s.has_engine || !s.port) continue;
      Action w;
      w.kind = ActionKind::kWaitHealthy;
      w.address = address;
      w.unit = s.UnitName();
      w.reason = Reason::kHealthGate;
      w.health_path = s.health.path;
      w.port = *s.port;
      w.served_name = s.ServedName();
      w.timeout_ms = s.health.timeout_ms;
      w.interval_ms = s.health.interval_ms;
      w.detail = "an interrupted apply started it but never saw it healthy";
      plan.actions.push_back(w);
    }
  }
  rep.plan = plan;
  out << PlanToText(plan, desired);
  if (!opt.out_path.empty()) {
    SavedPlan s;
    s.plan = plan;
    s.manifest_path = manifest_path;
    s.manifest_digest = desired.digest;
    s.host = observed->hostname;
    s.state_lineage = state->lineage;
    s.state_serial = state->serial;
    s.created_unix = static_cast<int64_t>(std::time(nullptr));
    s.fingerprints = Fingerprint(plan, *observed);
    std::ofstream f(opt.out_path, std::ios::trunc);
    f << SavedPlanToJson(s);
    if (!f) {
      err << "berth plan: cannot write " << opt.out_path << "\n";
      return Done(rep, Outcome::kError, 1, Status::IoError(opt.out_path));
    }
    out << "\nSaved to " << opt.out_path << "; carry it out with: berth apply " << opt.out_path
        << "\n";
  }
  rep.services_up = CountUp(desired, *observed, &rep.services_wanted);
  if (plan.blocked())
    return Done(rep, Outcome::kBlocked, 3, Status::FailedPrecondition(plan.problems[0].message),
                true);
  if (plan.empty()) return Done(rep, Outcome::kNoChanges, 0);
  if (!opt.apply) return Done(rep, Outcome::kPlanned, 2);

  if (!opt.yes) {
    out << "\nApply these " << plan.actions.size()
        << " actions? Only 'yes' is accepted: " << std::flush;
    std::string answer;
    if (opt.confirm) std::getline(*opt.confirm, answer);
    if (answer != "yes") {
      err << "berth apply: not confirmed; nothing was changed\n";
      return Done(rep, Outcome::kNotConfirmed, 1, Status::FailedPrecondition("not confirmed"));
    }
  }

  Journal journal;
  journal.started = NowRfc3339();
  journal.pid = std::to_string(::getpid());
  journal.manifest_digest = desired.digest;
  for (size_t i = 0; i < plan.actions.size(); ++i)
    journal.entries.push_back({static_cast<int>(i + 1), ActionKindName(plan.actions[i].kind),
                               plan.actions[i].address, "pending", ""});
  Status js = sd.SaveJournal(journal);
  if (!js.ok()) {
    err << "berth apply: " << js.message() << "; nothing was changed\n";
    return Done(rep, Outcome::kError, 1, js);
  }

  CurlHealthProbe health;
  ExecutorDeps deps;
  deps.systemd = host.systemd.get();
  deps.unit_files = host.unit_files.get();
  deps.health = &health;
  deps.journal = host.journal.get();
  deps.store = desired.host.store.empty() ? DefaultStorePath() : desired.host.store;
  deps.hub = HubOptionsFromEnvironment();
  deps.progress = &out;
  deps.progress_tty = ::isatty(1) == 1;
  deps.stop = opt.stop;
  if (const char* k = std::getenv("BERTH_FAULT_KILL_AT_STEP")) deps.kill_at_step = std::atoi(k);
  deps.on_action = [&](int step, const Action&, const std::string& status,
                       const std::string& message) {
    journal.entries[static_cast<size_t>(step - 1)].status = status;
    journal.entries[static_cast<size_t>(step - 1)].message = message;
    (void)sd.SaveJournal(journal);  // best effort: the state is re-observed anyway
  };
  rep.exec = Executor(deps).Run(plan);

  State st = *state;
  Record(plan, journal, rep.exec, &st);
  st.serial++;
  st.manifest_digest = desired.digest;
  st.manifest_git_commit = GitCommitOf(manifest_path);
  st.last_apply = NowRfc3339();
  if (rep.exec.status.ok()) {
    st.failures.clear();
  } else if (rep.exec.failed_step > 0 && !rep.exec.interrupted) {
    const Action& a = plan.actions[static_cast<size_t>(rep.exec.failed_step - 1)];
    std::string address = a.address;
    st.failures[address] = {NowRfc3339(), rep.exec.status.message()};
  }
  Status ss = sd.Save(st);
  if (!ss.ok()) err << "berth apply: could not record the state: " << ss.message() << "\n";
  journal.finished = !rep.exec.interrupted;
  if (journal.finished)
    (void)sd.ClearJournal();
  else
    (void)sd.SaveJournal(journal);

  if (rep.exec.interrupted) {
    err << "berth apply: " << rep.exec.status.message() << "\n";
    return Done(rep, Outcome::kInterrupted, 1, rep.exec.status);
  }
  if (!rep.exec.status.ok()) {
    err << "berth apply: " << rep.exec.status.message() << "\n";
    if (!rep.exec.rollback_log.empty()) {
      err << (rep.exec.rolled_back ? "rolled back:" : "rollback incomplete:") << "\n";
      for (const auto& l : rep.exec.rollback_log) err << "  " << l << "\n";
    }
    err << rep.exec.steps_done << " of " << plan.actions.size()
        << " steps were done; berth plan shows what is left\n";
    bool terminal = rep.exec.status.code() == Status::Code::kPermissionDenied;
    return Done(rep, Outcome::kFailed, 4, rep.exec.status, terminal);
  }

  auto after = host.Observe(desired, st.ToObserved());
  if (!after.ok()) {
    err << "berth apply: applied, but observing the host again failed: " << after.status().message()
        << "\n";
    return Done(rep, Outcome::kError, 1, after.status());
  }
  rep.services_up = CountUp(desired, *after, &rep.services_wanted);
  Plan left = MakePlan(desired, *after);
  if (!left.empty()) {
    err << "berth apply: applied, but the host has not converged; what is left:\n"
        << PlanToText(left, desired);
    return Done(rep, Outcome::kError, 1, Status::Unavailable("not converged"));
  }
  out << "applied " << plan.actions.size() << " actions; the host matches the manifests\n";
  return Done(rep, Outcome::kApplied, 0);
}

}  // namespace berth
