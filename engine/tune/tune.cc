#include "engine/tune/tune.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <utility>

#include "core/atomic_file.h"
#include "core/read_file.h"
#include "core/unified_diff.h"
#include "core/units.h"
#include "engine/apply/executor.h"
#include "engine/output/tune_report.h"
#include "engine/state/state.h"
#include "manifests/loader.h"
#include "manifests/service_edit.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using Verdict = TuneOutcome::Verdict;

std::string Ms(double ms) { return FormatDurationMs(static_cast<uint64_t>(ms + 0.5)); }

// The names the winner's patch gives `file` (old, new): as `git diff` writes them, a/ and b/
// before its path in the git work tree that holds it, so that `git apply` takes the patch from
// anywhere in the repository; outside one, the path as given.
std::pair<std::string, std::string> PatchNames(const std::string& file) {
  std::error_code ec;
  fs::path path = fs::absolute(file, ec).lexically_normal();
  for (fs::path dir = path.parent_path(); !ec && dir.has_relative_path(); dir = dir.parent_path())
    if (fs::exists(dir / ".git", ec)) {
      std::string in_tree = path.lexically_relative(dir).generic_string();
      return {"a/" + in_tree, "b/" + in_tree};
    }
  return {file, file};
}

class Sweep {
 public:
  Sweep(const TuneOptions& o, const TuneDeps& d)
      : o_(o), d_(d), clock_(d.pass.clock ? *d.pass.clock : RealClock()) {}

  Result<TuneReport> Run() {
    if (Status s = Begin(); !s.ok()) return s;
    if (!o_.plan_only) {
      auto lock = StateLock::Acquire(o_.state_dir, o_.lock_timeout, "berth tune " + o_.spec.service,
                                     clock_);
      if (!lock.ok()) return lock.status();
      lock_ = std::move(lock).value();
    }
    for (size_t i = 0; i < r_.outcomes.size(); ++i)
      if (Status s = CheckFeasible(i); !s.ok()) return s;
    if (o_.plan_only) return r_;
    if (o_.resume) Resume();
    for (size_t i = 0; i < r_.outcomes.size() && !Stopped(); ++i) Try(i);
    r_.winner = PickWinner(o_.spec.objective, &r_.outcomes);
    if (r_.winner && !r_.outcomes[*r_.winner].candidate.settings.empty()) {
      auto [old_name, new_name] = PatchNames(r_.declaring_file);
      r_.patch = UnifiedDiff(original_, edits_[*r_.winner].text, old_name, new_name);
    }
    End();
    Save();
    return r_;
  }

 private:
  // The declaring file, each candidate's manifest, the baseline first.
  Status Begin() {
    const TuneSpec& spec = o_.spec;
    r_.spec = spec;
    r_.manifest_path = o_.manifest_path;
    r_.started = NowRfc3339(clock_);
    Result<std::string> file = DeclaringFile(o_.manifest_path, spec.service);
    if (!file.ok()) return file.status();
    r_.declaring_file = *file;
    Result<std::string> text =
        ReadRegularFile(*file, {.max_bytes = kMaxManifestFileBytes, .follow_links = true});
    if (!text.ok()) return text.status();
    original_ = *text;
    LoadResult declared = LoadManifests(o_.manifest_path);
    if (!declared.ok())
      return Status::InvalidArgument("the manifest " + o_.manifest_path +
                                     " is invalid: " + declared.diagnostics[0].ToString() +
                                     " (berth validate lists every problem)");
    declared_ = std::move(declared.desired);
    auto svc = declared_.services.find(spec.service);
    if (svc == declared_.services.end() || !svc->second.has_engine || !svc->second.port)
      return Status::InvalidArgument(spec.file + ": service '" + spec.service +
                                     "' is not a service with an engine and a " + "port in " +
                                     o_.manifest_path + ", so berth cannot measure it");
    if (auto m = declared_.models.find(svc->second.model); m != declared_.models.end()) {
      r_.model = m->first;
      r_.commit = m->second.revision;
    }
    if (spec.baseline) {
      TuneCandidate declared_candidate;
      declared_candidate.name = "declared";
      Add(declared_candidate);
    }
    for (const TuneCandidate& c : spec.candidates) Add(c);
    return Status::Ok();
  }

  void Add(const TuneCandidate& c) {
    TuneOutcome out;
    out.candidate = c;
    ManifestEdit edit{r_.declaring_file, original_};
    if (!c.settings.empty()) {
      Result<std::string> text =
          SetServiceSettings(original_, r_.declaring_file, o_.spec.service, c.settings);
      if (!text.ok()) {
        Infeasible(&out, text.status().message());
      } else {
        edit.text = *text;
        LoadResult l = LoadManifests(o_.manifest_path, &edit);
        if (!l.ok())
          Infeasible(&out,
                     "with these settings the manifest is invalid: " + l.diagnostics[0].ToString());
      }
    }
    r_.outcomes.push_back(std::move(out));
    edits_.push_back(std::move(edit));
  }

  void Infeasible(TuneOutcome* out, const std::string& why) {
    out->verdict = Verdict::kInfeasible;
    out->why = why;
    Say(out->candidate.name + ": infeasible: " + why);
  }

  ReconcileOptions Pass(size_t i, bool apply) const {
    ReconcileOptions p;
    p.manifest_path = o_.manifest_path;
    p.state_dir = o_.state_dir;
    p.apply = apply;
    p.yes = true;
    p.lock_held = apply;
    p.manifest_edit = edits_[i].text == original_ ? nullptr : &edits_[i];
    return p;
  }

  RunReport RunPass(const ReconcileOptions& p) const {
    std::ostringstream sink;
    std::ostream& log = o_.pass_log ? *o_.pass_log : sink;
    Reporter say(log, log);
    ReconcilerDeps deps = d_.pass;
    deps.reporter = &say;
    deps.clock = &clock_;
    return Reconciler(deps).Run(p);
  }

  // The plan from here to candidate i: blocked or refused by its engine check is infeasible;
  // else its switch and dark window. An error observing the host ends the sweep.
  Status CheckFeasible(size_t i) {
    TuneOutcome& out = r_.outcomes[i];
    if (out.verdict == Verdict::kInfeasible) return Status::Ok();
    RunReport rep = RunPass(Pass(i, /*apply=*/false));
    if (rep.outcome == Outcome::kBlocked || rep.outcome == Outcome::kInvalid) {
      Infeasible(&out, rep.status.message());
      return Status::Ok();
    }
    if (rep.outcome != Outcome::kPlanned && rep.outcome != Outcome::kNoChanges)
      return Status::FailedPrecondition("planning " + out.candidate.name +
                                        " failed: " + rep.status.message());
    Describe(rep.plan, &out);
    if (Status s = CheckEngines(i, rep.plan); !s.ok())
      Infeasible(&out, s.message());
    else
      Say(out.candidate.name + ": feasible, " + out.switch_mode);
    return Status::Ok();
  }

  // The switch of the tuned service and the dark window the plan gives it.
  void Describe(const Plan& plan, TuneOutcome* out) const {
    out->switch_mode = "none";
    for (const Switch& sw : plan.switches)
      if (sw.address == "service/" + o_.spec.service) out->switch_mode = SwitchModeName(sw.mode);
    out->dark_expected_ms = out->dark_worst_ms = 0;
    for (const Disruption& d : plan.disruptions) {
      if (d.front_mode == "none") continue;  // make-before-break: no request waits
      out->dark_expected_ms = std::max(out->dark_expected_ms, d.estimate.expected_ms.value_or(0));
      out->dark_worst_ms = std::max(out->dark_worst_ms, d.estimate.worst_ms);
    }
  }

  // The engine checks of candidate i's plan, run now: what `berth apply` would run before its
  // stop, so a configuration the engine refuses is listed before anything runs.
  Status CheckEngines(size_t i, const Plan& plan) const {
    bool any = std::any_of(plan.actions.begin(), plan.actions.end(), [](const Action& a) {
      return a.kind == ActionKind::kPreflight && !a.As<PreflightStep>().engine.empty();
    });
    if (!any || !d_.pass.engine_check_dir) return Status::Ok();
    LoadResult l = LoadManifests(o_.manifest_path, &edits_[i]);
    Result<HostSeams> seams = d_.pass.connect(l.desired);
    if (!seams.ok()) return seams.status();
    ExecutorDeps deps;
    static_cast<ExecutorSeams&>(deps) = *seams;
    deps.clock = &clock_;
    deps.engine_check_dir = *d_.pass.engine_check_dir;
    Executor check(deps);
    for (const Action& a : plan.actions)
      if (a.kind == ActionKind::kPreflight && !a.As<PreflightStep>().engine.empty())
        if (Status s = check.RunAction(a); !s.ok()) return s;
    return Status::Ok();
  }

  // Candidates an earlier sweep measured with the same load on the same model keep its figures.
  void Resume() {
    Result<std::string> text =
        ReadRegularFile(Dir() + "/report.json", {.max_bytes = 16 * 1024 * 1024});
    if (!text.ok()) {
      Say("--resume: no earlier results (" + text.status().message() + "); every candidate runs");
      return;
    }
    Result<TuneReport> before = TuneReportFromJson(*text);
    if (!before.ok()) {
      Say("--resume: the earlier results are unreadable (" + before.status().message() +
          "); every candidate runs");
      return;
    }
    if (before->spec.load != o_.spec.load || before->commit != r_.commit) {
      Say("--resume: the earlier sweep measured another load or model; every candidate runs");
      return;
    }
    for (TuneOutcome& out : r_.outcomes)
      for (const TuneOutcome& old : before->outcomes)
        if (out.verdict == Verdict::kNotRun && old.verdict == Verdict::kMeasured &&
            old.candidate.settings == out.candidate.settings && old.figures) {
          out.verdict = Verdict::kMeasured;
          out.figures = old.figures;
          out.gates = old.gates;
          out.switch_ms = old.switch_ms;
          out.resumed = true;
          Say(out.candidate.name + ": measured by the earlier sweep; not run again");
        }
  }

  // Switches to candidate i and measures it; a failure is recorded, the undo having run.
  void Try(size_t i) {
    TuneOutcome& out = r_.outcomes[i];
    if (out.verdict != Verdict::kNotRun) return;
    // The declared configuration again (an axis's values as declared): its figures are the
    // baseline's.
    if (i > 0 && o_.spec.baseline && edits_[i].text == original_ &&
        r_.outcomes[0].verdict == Verdict::kMeasured) {
      out.verdict = Verdict::kMeasured;
      out.figures = r_.outcomes[0].figures;
      out.gates = r_.outcomes[0].gates;
      Say(out.candidate.name + ": the declared configuration; its figures are declared's");
      return;
    }
    Say(out.candidate.name + (out.switch_mode == "none"
                                  ? std::string(": measuring (it runs already)")
                                  : ": switching (" + out.switch_mode + ")"));
    auto t0 = clock_.Now();
    ReconcileOptions p = Pass(i, /*apply=*/true);
    p.stop = o_.stop;
    RunReport rep = RunPass(p);
    out.switch_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - t0).count());
    // The switch as it was planned from the candidate before it (the feasibility check planned
    // it from where the sweep began).
    if (!rep.plan.actions.empty()) Describe(rep.plan, &out);
    if (rep.outcome == Outcome::kInterrupted || Stopped()) {
      out.why = "the sweep was stopped";
      return;
    }
    if (rep.outcome != Outcome::kApplied && rep.outcome != Outcome::kNoChanges) {
      out.verdict = rep.outcome == Outcome::kBlocked ? Verdict::kInfeasible : Verdict::kFailed;
      out.why = rep.status.message();
      if (rep.exec.rolled_back)  // on the first line: the journal's lines may follow it
        out.why.insert(std::min(out.why.find('\n'), out.why.size()),
                       " (rolled back: the previous configuration runs)");
      Say(out.candidate.name + ": " + out.why);
      Save();
      return;
    }
    out.gates = Gates(rep);
    LoadResult l = LoadManifests(o_.manifest_path, &edits_[i]);
    Result<TuneFigures> f = d_.measure(l.desired, o_.spec.service, o_.spec.load, o_.stop);
    if (Stopped()) {
      out.why = "the sweep was stopped while it measured";
      return;
    }
    if (!f.ok()) {
      out.verdict = Verdict::kFailed;
      out.why = "measuring it failed: " + f.status().message();
    } else {
      out.verdict = Verdict::kMeasured;
      out.figures = *f;
      std::ostringstream line;
      line << out.candidate.name << ": " << static_cast<int64_t>(f->output_tps + 0.5)
           << " output tok/s, TTFT p99 " << Ms(f->ttft_p99_ms) << ", TPOT p99 "
           << Ms(f->tpot_p99_ms);
      Say(line.str());
    }
    Save();
  }

  // The gates the candidate's switch passed, one line each.
  static std::vector<std::string> Gates(const RunReport& rep) {
    std::vector<std::string> gates;
    for (size_t k = 0; k < rep.plan.actions.size() && static_cast<int>(k) < rep.exec.steps_done;
         ++k) {
      const Action& a = rep.plan.actions[k];
      std::string line = ActionKindName(a.kind);
      if (a.kind == ActionKind::kWaitHealthy) {
        line = "health";
        if (auto t = rep.exec.start_to_healthy_ms.find(a.unit);
            t != rep.exec.start_to_healthy_ms.end())
          line += " " + FormatDurationMs(t->second);
      } else if (a.kind == ActionKind::kFloor) {
        if (auto t = rep.exec.floor_figures.find(a.unit); t != rep.exec.floor_figures.end())
          line += " " + t->second;
      } else if (a.kind != ActionKind::kSmoke && a.kind != ActionKind::kSoak &&
                 !(a.kind == ActionKind::kPreflight && !a.As<PreflightStep>().engine.empty())) {
        continue;
      }
      if (a.kind == ActionKind::kPreflight) line = "engine check";
      gates.push_back(line);
    }
    return gates;
  }

  // The last pass: the manifest as declared, or the winner's (keep_winner). It runs also after
  // Ctrl-C (without the stop flag): a sweep never leaves a candidate behind.
  void End() {
    size_t target = 0;
    bool winner = o_.keep_winner && r_.winner;
    ReconcileOptions p = Pass(0, /*apply=*/true);
    p.manifest_edit = nullptr;
    if (winner) {
      target = *r_.winner;
      p = Pass(target, /*apply=*/true);
    }
    Say(std::string("back to the ") + (winner
                                           ? "winner (" + r_.outcomes[target].candidate.name + ")"
                                           : std::string("declared configuration")));
    RunReport rep = RunPass(p);
    if (rep.outcome == Outcome::kApplied || rep.outcome == Outcome::kNoChanges)
      r_.ended_on = winner ? "winner" : "declared";
    else
      r_.ended_on = "neither: the last pass ended " + std::string(OutcomeName(rep.outcome)) + ": " +
                    rep.status.message() + "; run berth apply -f " + o_.manifest_path;
  }

  void Save() {
    if (o_.plan_only) return;
    std::error_code ec;
    fs::create_directories(Dir(), ec);
    Status s = WriteFileAtomically(Dir() + "/report.json", TuneReportJson(r_));
    if (!s.ok()) Say("the results were not saved: " + s.message());
  }

  std::string Dir() const { return TuneResultsDir(o_.state_dir, o_.spec.service); }
  bool Stopped() const { return o_.stop && o_.stop->load(); }
  void Say(const std::string& line) const {
    if (o_.progress) o_.progress(line);
  }

  const TuneOptions& o_;
  const TuneDeps& d_;
  Clock& clock_;
  TuneReport r_;
  Desired declared_;
  std::string original_;
  std::vector<ManifestEdit> edits_;  // per outcome: its manifest file's text
  std::unique_ptr<StateLock> lock_;
};

double Metric(const TuneObjective& o, const TuneFigures& f) {
  return o.maximize == TuneObjective::Metric::kGoodput ? f.goodput_rps : f.output_tps;
}

}  // namespace

std::string TuneResultsDir(const std::string& state_dir, const std::string& service) {
  return state_dir + "/tune/" + service;
}

std::optional<size_t> PickWinner(const TuneObjective& objective,
                                 std::vector<TuneOutcome>* outcomes) {
  std::optional<size_t> best;
  for (size_t i = 0; i < outcomes->size(); ++i) {
    TuneOutcome& out = (*outcomes)[i];
    out.missed.clear();
    out.meets_limits = false;
    if (out.verdict != Verdict::kMeasured || !out.figures) continue;
    const TuneFigures& f = *out.figures;
    auto limit = [&](const char* what, double value, double max) {
      if (max <= 0 || value <= max) return;
      out.missed +=
          (out.missed.empty() ? "" : "; ") + std::string(what) + " " + Ms(value) + " > " + Ms(max);
    };
    limit("TTFT p99", f.ttft_p99_ms, objective.ttft_p99_ms);
    limit("TPOT p99", f.tpot_p99_ms, objective.tpot_p99_ms);
    limit("E2E p99", f.e2e_p99_ms, objective.e2e_p99_ms);
    if (f.requests == 0 || f.errors > 0)
      out.missed += (out.missed.empty() ? "" : "; ") +
                    (f.requests == 0 ? std::string("no request was measured")
                                     : std::to_string(f.errors) + " of " +
                                           std::to_string(f.requests) + " requests failed");
    out.meets_limits = out.missed.empty();
    if (out.meets_limits &&
        (!best || Metric(objective, f) > Metric(objective, *(*outcomes)[*best].figures)))
      best = i;
  }
  return best;
}

Result<TuneReport> TuneService(const TuneOptions& options, const TuneDeps& deps) {
  return Sweep(options, deps).Run();
}

}  // namespace berth
