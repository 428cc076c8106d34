#include "engine/apply/executor.h"

#include <signal.h>

#include <memory>
#include <mutex>
#include <thread>

#include "engine/apply/model_store.h"
#include "engine/core/unit_marker.h"
#include "engine/core/units.h"
#include "engine/output/progress.h"
#include "providers/health/health_probe.h"
#include "providers/systemd/systemd_manager.h"
#include "providers/systemd/unit_files.h"

namespace berth {
Executor::Executor(ExecutorDeps deps) : d_(deps) {
  if (!d_.clock) d_.clock = &RealClock();
  // One board for every download of the run: a bar per model and one for the total.
  if (d_.progress) printer_ = std::make_unique<ProgressPrinter>(*d_.progress, d_.progress_tty);
}

Executor::~Executor() = default;

ExecResult Executor::Run(const Plan& plan) {
  ExecResult r;
  if (plan.blocked()) {
    r.status = Status::FailedPrecondition("the plan is blocked; nothing was changed");
    return r;
  }
  size_t n = plan.actions.size();
  step_started_.assign(n, d_.clock->Now());
  for (size_t i = 0; i < n; ++i) {
    step_started_[i] = d_.clock->Now();
    if (d_.stop && d_.stop->load()) {
      r.interrupted = true;
      r.status = Status::Unavailable("interrupted after step " + std::to_string(i) + " of " +
                                     std::to_string(n) + "; the next run picks up from here");
      return r;
    }
    if (d_.kill_at_step == static_cast<int>(i + 1)) ::raise(SIGKILL);
    const Action& a = plan.actions[i];
    // Downloads side by side: every download at the head of the plan runs at once.
    size_t last = i;
    while (a.kind == ActionKind::kDownload && last + 1 < n &&
           plan.actions[last + 1].kind == ActionKind::kDownload)
      ++last;
    if (a.kind == ActionKind::kDownload && last > i) {
      Status s = RunDownloads(plan, i, last, &r);
      if (!s.ok()) {
        r.status = s;
        r.interrupted = d_.stop && d_.stop->load();
        return r;
      }
      r.steps_done = static_cast<int>(last + 1);
      i = last;
      continue;
    }
    if (d_.progress)
      *d_.progress << "[" << (i + 1) << "/" << n << "] " << ActionKindName(a.kind) << " "
                   << a.address << " ..." << std::endl;
    if (d_.on_action) d_.on_action(static_cast<int>(i + 1), a, "running", "");
    auto start = d_.clock->Now();
    Status s = RunAction(a, &r);
    if (d_.on_action)
      d_.on_action(static_cast<int>(i + 1), a, s.ok() ? "done" : "failed", s.message());
    if (!s.ok()) {
      r.status = s.WithContext("step " + std::to_string(i + 1) + " (" + ActionKindName(a.kind) +
                               " " + a.address + ")");
      r.failed_step = static_cast<int>(i + 1);
      // Asked to stop (SIGINT/SIGTERM) during a long action: interrupted, not failed.
      r.interrupted = d_.stop && d_.stop->load();
      if (d_.rollback && !r.interrupted) Rollback(plan, i, &r);
      return r;
    }
    r.steps_done = static_cast<int>(i + 1);
    // A health gate after this run's start or restart of its unit: how long that start took.
    if (a.kind == ActionKind::kWaitHealthy)
      for (size_t k = i; k-- > 0;) {
        const Action& b = plan.actions[k];
        if (b.unit != a.unit || (b.kind != ActionKind::kStart && b.kind != ActionKind::kRestart))
          continue;
        NoteHealthy(a.unit, step_started_[k], &r);
        break;
      }
    if (d_.progress) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d_.clock->Now() - start);
      *d_.progress << "[" << (i + 1) << "/" << n << "] done in "
                   << FormatDurationMs(static_cast<uint64_t>(ms.count())) << std::endl;
    }
  }
  return r;
}

Status Executor::RunDownloads(const Plan& plan, size_t first, size_t last, ExecResult* r) {
  std::vector<Status> results(last - first + 1);
  std::vector<ExecResult> partial(results.size());
  std::vector<std::thread> threads;
  for (size_t i = first; i <= last; ++i) {
    if (d_.on_action) d_.on_action(static_cast<int>(i + 1), plan.actions[i], "running", "");
    threads.emplace_back([this, &plan, &results, &partial, first, i] {
      results[i - first] = Download(plan.actions[i], &partial[i - first]);
    });
  }
  for (auto& t : threads) t.join();
  Status first_error;
  for (size_t i = first; i <= last; ++i) {
    const Status& s = results[i - first];
    if (d_.on_action)
      d_.on_action(static_cast<int>(i + 1), plan.actions[i], s.ok() ? "done" : "failed",
                   s.message());
    for (auto& d : partial[i - first].downloaded) r->downloaded.push_back(d);
    r->bytes_downloaded += partial[i - first].bytes_downloaded;
    if (!s.ok() && first_error.ok()) {
      first_error = s.WithContext("step " + std::to_string(i + 1) + " (download " +
                                  plan.actions[i].address + ")");
      r->failed_step = static_cast<int>(i + 1);
    }
  }
  return first_error;
}

void Executor::Rollback(const Plan& plan, size_t failed, ExecResult* r) {
  const Action& f = plan.actions[failed];
  if (f.kind != ActionKind::kStart && f.kind != ActionKind::kWaitHealthy &&
      f.kind != ActionKind::kRestart)
    return;
  std::string service = f.address.substr(f.address.find('/') + 1);
  // What the failed change replaced: services stopped to make room for it, or (an in-place
  // update) the unit file it rewrote and restarted.
  std::vector<size_t> replaced;
  size_t restart_step = failed + 1;  // none
  for (size_t i = 0; i <= failed; ++i) {
    const Action& a = plan.actions[i];
    if (i < failed && a.kind == ActionKind::kStop && a.for_service == service)
      replaced.push_back(i);
    if (a.kind == ActionKind::kRestart && a.unit == f.unit) restart_step = i;
  }
  bool in_place = restart_step <= failed && replaced_units_.count(f.unit);
  if (replaced.empty() && !in_place) return;
  auto note = [&](const std::string& line) {
    r->rollback_log.push_back(line);
    if (d_.progress) *d_.progress << "rollback: " << line << std::endl;
  };
  // The gate the failed change would have passed: how berth knows the service is back.
  const Action* own_gate = nullptr;
  for (const Action& a : plan.actions)
    if (a.kind == ActionKind::kWaitHealthy && a.address == f.address) own_gate = &a;

  if (in_place) {
    Status s = d_.unit_files->Write(f.unit, replaced_units_[f.unit]).status();
    note("restore the unit file of " + f.unit + " that berth replaced" +
         (s.ok() ? "" : " failed: " + s.message()));
    if (s.ok()) {
      s = d_.systemd->Reload();
      note("daemon-reload" + (s.ok() ? "" : " failed: " + s.message()));
    }
    auto restarted = d_.clock->Now();
    if (s.ok()) {
      s = d_.systemd->Restart(f.unit, d_.job_timeout);
      note("restart " + f.unit + " on its previous unit file" +
           (s.ok() ? "" : " failed: " + s.message()));
    }
    Action gate = own_gate ? *own_gate : Action{};
    r->rolled_back = s.ok() && BackHealthy(gate, f.unit, step_started_[restart_step], restarted, r);
    return;
  }
  Status s = d_.systemd->Stop(f.unit, d_.job_timeout);
  note("stop " + f.unit + (s.ok() ? "" : " failed: " + s.message()));
  bool all = true;
  for (size_t i : replaced) {
    const Action& stop = plan.actions[i];
    auto started = d_.clock->Now();
    Status st = d_.systemd->Start(stop.unit, d_.job_timeout);
    note("start " + stop.unit + " again" + (st.ok() ? "" : " failed: " + st.message()));
    // The stop carries the stopped service's own health gate (the planner put it there).
    Action gate;
    gate.kind = ActionKind::kWaitHealthy;
    gate.unit = stop.unit;
    gate.port = stop.port;
    gate.health_path = stop.health_path;
    gate.served_name = stop.served_name;
    gate.timeout_ms = stop.timeout_ms;
    gate.interval_ms = stop.interval_ms;
    all =
        all && st.ok() && BackHealthy(gate, stop.unit, step_started_[replaced.front()], started, r);
  }
  r->rolled_back = all;
}

void Executor::NoteHealthy(const std::string& unit, Clock::TimePoint started, ExecResult* r) {
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(d_.clock->Now() - started);
  r->start_to_healthy_ms[unit] = static_cast<uint64_t>(std::max<int64_t>(0, took.count()));
}

bool Executor::BackHealthy(const Action& gate, const std::string& unit, Clock::TimePoint down,
                           Clock::TimePoint started, ExecResult* r) {
  auto note = [&](const std::string& line) {
    r->rollback_log.push_back(line);
    if (d_.progress) *d_.progress << "rollback: " << line << std::endl;
  };
  if (gate.port == 0) {
    note(unit + " runs again; berth knows no health check for it, so it did not wait for one");
    return true;
  }
  Action wait = gate;
  wait.kind = ActionKind::kWaitHealthy;
  wait.unit = unit;
  Status s = WaitHealthy(wait);
  auto dark = std::chrono::duration_cast<std::chrono::milliseconds>(d_.clock->Now() - down);
  if (!s.ok()) {
    note(unit + " did not become healthy again: " + s.message() + "; port " +
         std::to_string(gate.port) + " has been dark for " +
         FormatDurationMs(static_cast<uint64_t>(dark.count())) + " and still is");
    return false;
  }
  NoteHealthy(unit, started, r);
  r->outage = std::max(r->outage, dark);
  note(unit + " is healthy again; port " + std::to_string(gate.port) + " was dark for " +
       FormatDurationMs(static_cast<uint64_t>(dark.count())));
  return true;
}

Status Executor::RunAction(const Action& a, ExecResult* result) {
  switch (a.kind) {
    case ActionKind::kWriteUnit: {
      // Kept for a rollback of an in-place update (restored as it was, byte for byte).
      auto before = d_.unit_files->Read(a.unit);
      if (before.ok() && before->has_value() && !replaced_units_.count(a.unit))
        replaced_units_[a.unit] = **before;
      return d_.unit_files->Write(a.unit, StampLineage(a.unit_content, d_.lineage)).status();
    }
    case ActionKind::kRemoveUnit:
      return d_.unit_files->Remove(a.unit).status();
    case ActionKind::kDaemonReload:
      return d_.systemd->Reload();
    case ActionKind::kStart:
      return d_.systemd->Start(a.unit, d_.job_timeout);
    case ActionKind::kStop:
      return d_.systemd->Stop(a.unit, d_.job_timeout);
    case ActionKind::kRestart:
      return d_.systemd->Restart(a.unit, d_.job_timeout);
    case ActionKind::kWaitHealthy:
      return WaitHealthy(a);
    case ActionKind::kEnable:
      return d_.systemd->Enable(a.unit);
    case ActionKind::kDisable:
      return d_.systemd->Disable(a.unit);
    case ActionKind::kDownload: {
      ExecResult ignored;
      return Download(a, result ? result : &ignored);
    }
    case ActionKind::kRemoveModel: {
      auto freed = d_.models->Remove(a.repo_id, a.commit);
      if (!freed.ok()) return freed.status();
      if (d_.progress)
        *d_.progress << "removed " << a.repo_id << "@" << a.commit.substr(0, 7) << ", freed "
                     << FormatBytes(*freed) << std::endl;
      return Status::Ok();
    }
  }
  return Status::Internal("unknown action kind");
}

Status Executor::Download(const Action& a, ExecResult* result) {
  ProgressPrinter* printer = printer_.get();
  std::function<void(const PullProgress&)> on_progress;
  if (printer) on_progress = [printer](const PullProgress& p) { printer->Update(p); };
  auto r = d_.models->Download(a, d_.stop, on_progress);
  if (!r.ok()) return r.status();
  if (d_.on_downloaded) d_.on_downloaded(a.repo_id, r->commit);
  result->downloaded.emplace_back(a.repo_id, r->commit);
  result->bytes_downloaded += r->bytes_fetched;
  if (printer) {
    PullProgress p;
    p.repo_id = a.repo_id;
    p.bytes_done = p.bytes_total = r->bytes_total;
    p.bytes_fetched = r->bytes_fetched;
    p.files_done = p.files_total = r->files;
    p.seconds = r->seconds;
    printer->Done(p);
  }
  return Status::Ok();
}

std::string Executor::JournalTail(const std::string& unit) {
  if (!d_.journal) return "";
  std::string out;
  for (const auto& line : d_.journal->Tail(unit, 15)) out += "\n    " + line;
  return out.empty() ? "" : "\n  last journal lines of " + unit + ":" + out;
}

Status Executor::WaitHealthy(const Action& a) {
  auto deadline = d_.clock->Now() + std::chrono::milliseconds(a.timeout_ms);
  auto interval = std::chrono::milliseconds(a.interval_ms ? a.interval_ms : 1000);
  // The first probes come quickly: a small model is up in a second or two.
  auto wait = std::min(interval, std::chrono::milliseconds(200));
  std::string last = "no probe made";
  for (;;) {
    // A crash loop fails fast: the unit must stay up while it loads.
    auto props = d_.systemd->GetUnits({a.unit});
    if (!props.ok()) return props.status();
    const UnitProperties& p = (*props)[0];
    if (p.active_state == "failed" || p.active_state == "inactive") {
      return Status::FailedPrecondition(
          a.unit + " stopped while berth waited for it to become healthy (" + p.active_state +
          ", Result=" + p.result + ", exit status " + std::to_string(p.exec_main_status) +
          "); last probe: " + last + JournalTail(a.unit));
    }
    if (p.sub_state == "auto-restart" || p.n_restarts > 0) {
      return Status::FailedPrecondition(
          a.unit + " exited (Result=" + p.result + ", exit status " +
          std::to_string(p.exec_main_status) +
          ") and systemd is restarting it instead of it becoming healthy" + JournalTail(a.unit));
    }
    HealthResult h = d_.health->Probe("127.0.0.1", a.port, a.health_path, a.served_name);
    if (h.healthy) return Status::Ok();
    last = h.detail;
    if (d_.clock->Now() >= deadline)
      return Status::Unavailable(a.unit + " did not become healthy within " +
                                 FormatDurationMs(a.timeout_ms) + "; last probe: " + last +
                                 JournalTail(a.unit));
    d_.clock->SleepFor(wait);
    wait = std::min(interval, wait * 2);
  }
}

}  // namespace berth
