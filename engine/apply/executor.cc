#include "engine/apply/executor.h"

#include <memory>
#include <thread>

#include "engine/core/units.h"
#include "engine/output/progress.h"
#include "providers/health/health_probe.h"
#include "providers/hub/pull.h"
#include "providers/systemd/systemd_manager.h"
#include "providers/systemd/unit_files.h"

namespace berth {
namespace {

class SteadyClock : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() override { return std::chrono::steady_clock::now(); }
  void SleepFor(std::chrono::milliseconds d) override { std::this_thread::sleep_for(d); }
};

}  // namespace

Clock& RealClock() {
  static SteadyClock clock;
  return clock;
}

Executor::Executor(ExecutorDeps deps) : d_(deps) {
  if (!d_.clock) d_.clock = &RealClock();
}

ExecResult Executor::Run(const Plan& plan) {
  ExecResult r;
  if (plan.blocked()) {
    r.status = Status::FailedPrecondition("the plan is blocked; nothing was changed");
    return r;
  }
  for (size_t i = 0; i < plan.actions.size(); ++i) {
    const Action& a = plan.actions[i];
    if (d_.progress)
      *d_.progress << "[" << (i + 1) << "/" << plan.actions.size() << "] " << ActionKindName(a.kind)
                   << " " << a.address << " ..." << std::endl;
    auto start = d_.clock->Now();
    Status s = RunAction(a);
    if (!s.ok()) {
      r.status = s.WithContext("step " + std::to_string(i + 1) + " (" + ActionKindName(a.kind) +
                               " " + a.address + ")");
      r.failed_step = static_cast<int>(i + 1);
      return r;
    }
    r.steps_done = static_cast<int>(i + 1);
    if (d_.progress) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d_.clock->Now() - start);
      *d_.progress << "[" << (i + 1) << "/" << plan.actions.size() << "] done in "
                   << FormatDurationMs(static_cast<uint64_t>(ms.count())) << std::endl;
    }
  }
  return r;
}

Status Executor::RunAction(const Action& a) {
  switch (a.kind) {
    case ActionKind::kWriteUnit:
      return d_.unit_files->Write(a.unit, a.unit_content).status();
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
    case ActionKind::kDownload:
      return Download(a);
    case ActionKind::kRemoveModel: {
      auto freed = RemoveRevision(d_.store, a.repo_id, a.commit);
      if (!freed.ok()) return freed.status();
      if (d_.progress)
        *d_.progress << "removed " << a.repo_id << "@" << a.commit.substr(0, 7) << ", freed "
                     << FormatBytes(*freed) << std::endl;
      return Status::Ok();
    }
  }
  return Status::Internal("unknown action kind");
}

Status Executor::Download(const Action& a) {
  PullRequest req;
  req.store = d_.store;
  req.repo_id = a.repo_id;
  req.revision = a.revision;
  req.include = a.include;
  req.exclude = a.exclude;
  req.expect_commit = a.commit;
  HubOptions hub = d_.hub;
  std::unique_ptr<ProgressPrinter> printer;
  if (d_.progress) {
    printer = std::make_unique<ProgressPrinter>(*d_.progress, d_.progress_tty);
    hub.on_progress = [&printer](const PullProgress& p) { printer->Update(p); };
  }
  auto r = PullModel(req, hub);
  if (!r.ok()) return r.status();
  if (printer) {
    PullProgress p;
    p.repo_id = a.repo_id;
    p.bytes_done = p.bytes_total = r->bytes_total;
    p.bytes_fetched = r->stats.bytes_fetched;
    p.files_done = p.files_total = static_cast<int>(r->files.size());
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
