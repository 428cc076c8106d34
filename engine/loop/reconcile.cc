#include "engine/loop/reconcile.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/units.h"
#include "core/untrusted_text.h"
#include "engine/loop/metrics.h"

namespace berth {
namespace {

using std::chrono::milliseconds;

// Pings WATCHDOG=1 every `every` of `clock` from a thread while a pass runs: a pass may download
// for hours, and the loop cannot ping meanwhile. The pass's own steps have timeouts (jobs,
// health, HTTP).
class PassWatchdog {
 public:
  PassWatchdog(Notifier* notifier, Clock& clock, milliseconds every) {
    if (!notifier || every.count() <= 0) return;
    thread_ = std::thread([this, notifier, &clock, every] {
      std::unique_lock<std::mutex> lock(mu_);
      while (!clock.WaitUntil(lock, cv_, clock.Now() + every, [this] { return done_; }))
        notifier->Notify("WATCHDOG=1");
    });
  }
  ~PassWatchdog() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  PassWatchdog(const PassWatchdog&) = delete;
  PassWatchdog& operator=(const PassWatchdog&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

std::string OneLine(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  constexpr size_t kMax = 200;
  if (s.size() > kMax) s = std::string(Utf8Prefix(s, kMax - 3)) + "...";
  return s;
}

std::string Seconds(milliseconds d) {
  auto ms = static_cast<uint64_t>(std::max<int64_t>(d.count(), 0));
  return FormatDurationMs((ms + 500) / 1000 * 1000);
}

std::string Services(const RunReport& r) {
  return std::to_string(r.services_up) + "/" + std::to_string(r.services_wanted) + " services up";
}

// "converged: 3/3 services up", or, while a wanted service crash-loops, not converged:
// "crash-looping: x (...), 0/1 services up".
std::string Converged(const RunReport& r) {
  std::string looping = CrashLoopSummary(r);
  return looping.empty() ? "converged: " + Services(r) : looping + ", " + Services(r);
}

// The running state of one RunLoop call.
class Loop {
 public:
  Loop(const LoopOptions& options, const LoopDeps& deps) : o_(options), d_(deps) {
    if (d_.notifier) {
      auto timeout = d_.notifier->WatchdogTimeout();
      ping_every_ = std::chrono::duration_cast<milliseconds>(timeout / 2);
    }
    last_ping_ = d_.clock->Now();
  }

  Outcome Run() {
    Outcome last = Outcome::kNoChanges;
    while (!Stopping()) {
      if (d_.reload) d_.reload->store(false);
      std::string fingerprint = d_.manifest_fingerprint ? d_.manifest_fingerprint() : "";
      RunReport report = Pass();
      PassKind kind = ClassifyPass(report.outcome, report.terminal);
      failures_ = kind == PassKind::kRetryable ? failures_ + 1 : 0;
      NextPass next;
      next.kind = NextPass::Kind::kStop;
      if (!o_.once && !Stopping()) next = ScheduleNext(kind, failures_, o_.schedule, d_.uniform01);
      std::string status = StatusLine(report, next, failures_, o_.plan_only);
      Notify(std::string(ready_ ? "" : "READY=1\n") + "STATUS=" + status);
      ready_ = true;
      Ping();
      Log(status);
      if (o_.once) last = report.outcome;
      if (next.kind == NextPass::Kind::kStop) break;
      Wake w = Wait(next, fingerprint);
      if (w == Wake::kStop) break;
      if (w == Wake::kReload || w == Wake::kManifestChanged)
        Log(std::string(WakeName(w)) + ": running a pass now");
    }
    Notify("STOPPING=1");
    // The textfile outlives the process: the last one says the loop is down.
    metrics_.up = false;
    WriteMetrics();
    return last;
  }

 private:
  bool Stopping() const { return d_.stop && d_.stop->load(); }

  void Notify(const std::string& s) {
    if (d_.notifier) d_.notifier->Notify(s);
  }
  void Ping() {
    if (ping_every_.count() <= 0) return;
    Notify("WATCHDOG=1");
    last_ping_ = d_.clock->Now();
  }
  void Log(const std::string& line) {
    if (d_.log) *d_.log << "berth reconcile: " << line << std::endl;
  }

  RunReport Pass() {
    Clock::TimePoint start = d_.clock->Now();
    double start_unix = d_.clock->UnixNow();
    RunReport report;
    {
      PassWatchdog watchdog(d_.notifier, *d_.clock, ping_every_);
      report = d_.pass();
    }
    double seconds = std::chrono::duration<double>(d_.clock->Now() - start).count();
    metrics_.Record(report, start_unix, seconds);
    WriteMetrics();
    return report;
  }

  void WriteMetrics() {
    if (o_.metrics_path.empty()) return;
    if (d_.bench_records) metrics_.bench = d_.bench_records();
    if (d_.front_metrics) metrics_.fronts = d_.front_metrics();
    Status s = d_.write_file ? d_.write_file(o_.metrics_path, MetricsText(metrics_))
                             : WriteFileAtomically(o_.metrics_path, MetricsText(metrics_));
    if (!s.ok()) Log("metrics: " + s.message());
  }

  // Sleeps in slices: until the deadline, the next manifest check or the next watchdog ping,
  // whichever comes first; a signal cuts a slice short.
  Wake Wait(const NextPass& next, const std::string& fingerprint) {
    Clock& clock = *d_.clock;
    const Clock::TimePoint start = clock.Now();
    milliseconds poll = std::max(o_.schedule.manifest_poll, milliseconds(1));
    Clock::TimePoint next_probe = start + poll;
    while (true) {
      Clock::TimePoint now = clock.Now();
      WaitEvents ev;
      ev.stop = Stopping();
      ev.reload = d_.reload && d_.reload->load();
      ev.waited = std::chrono::duration_cast<milliseconds>(now - start);
      if (now >= next_probe) {
        ev.manifest_changed = d_.manifest_fingerprint && d_.manifest_fingerprint() != fingerprint;
        next_probe = now + poll;
      }
      Wake w = DecideWake(next, ev);
      if (w != Wake::kKeepWaiting) return w;
      if (ping_every_.count() > 0 && now - last_ping_ >= ping_every_) Ping();
      Clock::TimePoint until = next_probe;
      if (next.kind == NextPass::Kind::kAfter) until = std::min(until, start + next.wait);
      if (ping_every_.count() > 0) until = std::min(until, last_ping_ + ping_every_);
      clock.SleepUntil(until);
    }
  }

  const LoopOptions& o_;
  const LoopDeps& d_;
  LoopMetrics metrics_;
  int failures_ = 0;
  bool ready_ = false;
  milliseconds ping_every_{0};
  Clock::TimePoint last_ping_;
};

}  // namespace

std::string StatusLine(const RunReport& r, const NextPass& next, int failures, bool plan_only) {
  std::string what;
  switch (r.outcome) {
    case Outcome::kNoChanges:
      what = r.plan.host_matches ? Converged(r) : "nothing to do: " + OneLine(r.plan.skip_reason);
      break;
    case Outcome::kApplied:
      what = "applied " + std::to_string(r.plan.actions.size()) + " action" +
             (r.plan.actions.size() == 1 ? "" : "s") + ", " + Converged(r);
      break;
    case Outcome::kPlanned:
      what = std::string(plan_only ? "plan only: " : "") + std::to_string(r.plan.actions.size()) +
             " change" + (r.plan.actions.size() == 1 ? "" : "s") + " pending, " + Services(r);
      if (!r.crash_looping.empty()) what += ", " + CrashLoopSummary(r);
      break;
    case Outcome::kBlocked:
      what = "blocked: " + OneLine(r.status.message());
      break;
    case Outcome::kInvalid:
      what = "invalid manifest: " + OneLine(r.status.message());
      break;
    case Outcome::kFailed:
      what = std::string(r.exec.rolled_back ? "failed, rolled back: " : "failed: ") +
             OneLine(r.status.message());
      break;
    case Outcome::kInterrupted:
      what = "interrupted: " + OneLine(r.status.message());
      break;
    case Outcome::kHeld:
      what = "held: " + OneLine(r.status.message()) + "; berth apply --retry runs it again";
      break;
    default:
      what = std::string(OutcomeName(r.outcome)) + ": " + OneLine(r.status.message());
      break;
  }
  switch (next.kind) {
    case NextPass::Kind::kStop:
      return what;
    case NextPass::Kind::kWhenManifestChanges:
      return what + "; waiting for the manifest to change";
    case NextPass::Kind::kAfter:
      if (next.backoff)
        return what + "; retry " + std::to_string(failures) + " in " + Seconds(next.wait);
      return what + ", next pass in " + Seconds(next.wait);
  }
  return what;
}

Outcome RunLoop(const LoopOptions& options, const LoopDeps& deps) {
  return Loop(options, deps).Run();
}

}  // namespace berth
