#include "engine/apply/executor.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <thread>

#include "core/desired.h"
#include "core/front.h"
#include "core/unit_marker.h"
#include "core/units.h"
#include "core/untrusted_text.h"
#include "engine/apply/front_steps.h"
#include "engine/apply/model_store.h"
#include "providers/bench/load.h"
#include "providers/health/health_probe.h"
#include "providers/health/smoke_client.h"
#include "providers/health/standby_client.h"
#include "providers/host/command_runner.h"
#include "providers/host/engine_check.h"
#include "providers/systemd/systemd_manager.h"
#include "providers/systemd/unit_files.h"

namespace berth {
namespace {

std::string StepName(size_t i, const Action& a) {
  return "step " + std::to_string(i + 1) + " (" + ActionKindName(a.kind) + " " + a.address + ")";
}

}  // namespace

std::vector<SwitchUndo> SwitchesOf(
    const Plan& plan,
    const std::function<std::optional<std::string>(const std::string& unit)>& read_unit) {
  std::vector<SwitchUndo> out;
  for (const Switch& sw : plan.switches) {
    if (sw.gates.empty() && sw.replaces.empty()) continue;
    SwitchUndo u;
    u.address = sw.address;
    u.unit = sw.unit;
    u.replaced = sw.replaces;
    if (sw.health_gate) u.gate = plan.actions[*sw.health_gate].As<HealthStep>();
    if (sw.restores_unit) u.unit_before = read_unit(sw.unit);
    u.front_port = sw.front_port;
    u.front_socket = sw.front_socket;
    u.undo_route = sw.undo_route;
    out.push_back(std::move(u));
  }
  return out;
}

std::vector<SwitchUndo> UndoList(
    const Plan& plan, const std::vector<SwitchUndo>& earlier,
    const std::function<std::optional<std::string>(const std::string& unit)>& read_unit) {
  std::vector<SwitchUndo> fresh = SwitchesOf(plan, read_unit);
  std::vector<SwitchUndo> out;
  for (const SwitchUndo& e : earlier) {
    bool gated = std::any_of(plan.actions.begin(), plan.actions.end(), [&](const Action& a) {
      return IsGate(a.kind) && a.address == e.address;
    });
    if (!gated) continue;
    SwitchUndo u = e;
    auto f = std::find_if(fresh.begin(), fresh.end(),
                          [&](const SwitchUndo& x) { return x.address == e.address; });
    if (f != fresh.end()) {
      for (const Replaced& x : f->replaced)
        if (std::none_of(u.replaced.begin(), u.replaced.end(),
                         [&](const Replaced& y) { return y.unit == x.unit; }))
          u.replaced.push_back(x);
      if (!u.unit_before) u.unit_before = f->unit_before;
      if (!u.gate.port) u.gate = f->gate;
      // The route before the first of the runs (what served before the switch began).
      if (!u.front_port) {
        u.front_port = f->front_port;
        u.front_socket = f->front_socket;
      }
      if (u.undo_route.empty() || u.undo_route == kFrontHoldServer) u.undo_route = f->undo_route;
      fresh.erase(f);
    }
    out.push_back(std::move(u));
  }
  for (SwitchUndo& f : fresh) out.push_back(std::move(f));
  return out;
}

Executor::Executor(ExecutorDeps deps) : d_(std::move(deps)) {
  if (!d_.clock) d_.clock = &RealClock();
}

Executor::~Executor() = default;

void Executor::Tell(const Plan& plan, size_t i, StepState state, const std::string& message,
                    uint64_t healthy_after_ms) {
  StepEvent e;
  e.step = static_cast<int>(i + 1);
  e.steps = static_cast<int>(plan.actions.size());
  e.action = &plan.actions[i];
  e.state = state;
  e.message = message;
  if (state != StepState::kRunning)
    e.elapsed_ms = static_cast<uint64_t>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(d_.clock->Now() - step_started_[i])
               .count()));
  e.healthy_after_ms = healthy_after_ms;
  for (StepObserver* o : d_.observers) o->OnStep(e);
}

void Executor::Note(const std::string& line) {
  for (StepObserver* o : d_.observers) o->OnNote(line);
}

Status Executor::TurnBefore(const Plan& plan, size_t i, size_t to, ExecResult* r) {
  if (!d_.turn || std::none_of(plan.actions.begin() + static_cast<std::ptrdiff_t>(i),
                               plan.actions.begin() + static_cast<std::ptrdiff_t>(to) + 1,
                               [](const Action& x) { return x.takes_down; }))
    return Status::Ok();
  // The first takes the turn; each later one checks it is still held (a lease lost meanwhile
  // lets another host go dark) and takes it again if not.
  Status s;
  std::string why;
  if (turn_taken_ && d_.turn->StillHeld(&why)) return Status::Ok();
  if (turn_taken_) Note("fleet: this host's turn was lost (" + why + "); taking it again");
  s = d_.turn->Acquire();
  if (s.ok()) {
    turn_taken_ = true;
    return s;
  }
  r->interrupted = d_.stop && d_.stop->load();
  if (!turn_taken_) {
    r->turn_refused = true;
    return s;
  }
  r->turn_lost = true;
  return Status::Unavailable(
      "berth stopped before " + StepName(i, plan.actions[i]) +
      ": this host's turn in its fleet was lost after an earlier step took a service down, "
      "and taking it again failed (" +
      s.message() + "); what went dark stays so until the next run takes the turn");
}

ExecResult Executor::Run(const Plan& plan) {
  turn_taken_ = false;
  ExecResult r = RunSteps(plan);
  // After the gates passed, or the undo: the next host may go dark.
  if (d_.turn && turn_taken_) d_.turn->Release();
  return r;
}

ExecResult Executor::RunSteps(const Plan& plan) {
  ExecResult r;
  if (plan.blocked()) {
    r.status = Status::FailedPrecondition("the plan is blocked; nothing was changed");
    return r;
  }
  size_t n = plan.actions.size();
  step_started_.assign(n, d_.clock->Now());
  owner_.assign(n, -1);
  references_.clear();
  for (size_t k = 0; k < plan.switches.size(); ++k)
    for (size_t i : plan.switches[k].steps)
      if (i < n) owner_[i] = static_cast<int>(k);
  // What each switch's undo brings back: this plan's, merged with what an interrupted apply's
  // switches replaced (the journal keeps the same list).
  undo_ = UndoList(plan, d_.resumed, [this](const std::string& unit) {
    auto content = d_.unit_files->Read(unit);
    return content.ok() ? *content : std::nullopt;
  });
  const std::vector<ParallelGroup>& groups = plan.groups;
  auto group = groups.begin();
  auto batch = plan.downloads.begin();
  for (size_t i = 0; i < n; ++i) {
    step_started_[i] = d_.clock->Now();
    if (d_.stop && d_.stop->load()) {
      r.interrupted = true;
      r.status = Status::Unavailable("interrupted after step " + std::to_string(i) + " of " +
                                     std::to_string(n) + "; the next run picks up from here");
      return r;
    }
    // Downloads side by side (Plan::downloads).
    while (batch != plan.downloads.end() && batch->last < i) ++batch;
    if (batch != plan.downloads.end() && batch->first == i) {
      size_t last = batch->last;
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
    // Services on disjoint GPUs and ports come up side by side.
    while (group != groups.end() && group->last < i) ++group;
    bool grouped = group != groups.end() && group->first == i;
    // The fleet's turn, before each step that takes a service down.
    if (Status s = TurnBefore(plan, i, grouped ? group->last : i, &r); !s.ok()) {
      r.status = s;
      return r;
    }
    if (grouped) {
      Status s = RunGroup(plan, *group, &r);
      if (!s.ok()) {
        r.status = s;
        return r;
      }
      r.steps_done = static_cast<int>(group->last + 1);
      i = group->last;
      continue;
    }
    Status s = Step(plan, i, &r);
    if (!s.ok()) {
      r.status = s;
      r.failed_step = static_cast<int>(i + 1);
      // Asked to stop (SIGINT/SIGTERM) during a long action: interrupted, not failed.
      r.interrupted = d_.stop && d_.stop->load();
      if (d_.rollback && !r.interrupted) r.rolled_back = Rollback(plan, i, &r).value_or(false);
      return r;
    }
    r.steps_done = static_cast<int>(i + 1);
  }
  return r;
}

Status Executor::Step(const Plan& plan, size_t i, ExecResult* r) {
  const Action& a = plan.actions[i];
  step_started_[i] = d_.clock->Now();
  Tell(plan, i, StepState::kRunning);
  if (d_.at_step) d_.at_step(static_cast<int>(i + 1));
  Status s = RunAction(a, r);
  if (!s.ok()) {
    Tell(plan, i, StepState::kFailed, s.message());
    return s.WithContext(StepName(i, a));
  }
  if (a.kind == ActionKind::kStop) {
    auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(d_.clock->Now() - step_started_[i]);
    r->stop_ms[a.unit] = static_cast<uint64_t>(std::max<int64_t>(0, took.count()));
  }
  // The health gate of a switch: how long its start or restart took to become healthy.
  uint64_t healthy_after = 0;
  if (owner_[i] >= 0) {
    const Switch& sw = plan.switches[static_cast<size_t>(owner_[i])];
    if (sw.health_gate == i) healthy_after = NoteHealthy(sw.unit, step_started_[sw.start], r);
  }
  Tell(plan, i, StepState::kDone, "", healthy_after);
  return s;
}

Status Executor::RunGroup(const Plan& plan, const ParallelGroup& g, ExecResult* r) {
  struct ChainRun : berth::Chain {
    Status status;      // the first failure of this chain
    size_t failed = 0;  // its step (0-based), when status is not ok
  };
  std::vector<ChainRun> chains;
  for (const berth::Chain& c : g.chains) chains.push_back({c, Status::Ok(), 0});
  Note("steps " + std::to_string(g.first + 1) + "-" + std::to_string(g.last + 1) + ": " +
       std::to_string(chains.size()) + " services on disjoint GPUs and ports start side by side");
  // Every start first: each is only a systemd job, the long part is the model loading.
  for (ChainRun& c : chains) {
    c.status = Step(plan, c.start, r);
    if (!c.status.ok()) c.failed = c.start;
  }
  // Then every gate at once, each on its own schedule (fast first probes, then backing off).
  std::vector<GateWait> waits;
  std::vector<size_t> chain_of;  // waits[k] is the gate of chains[chain_of[k]]
  for (size_t k = 0; k < chains.size(); ++k) {
    ChainRun& c = chains[k];
    if (!c.status.ok()) continue;
    const Action& gate = plan.actions[c.gate];
    step_started_[c.gate] = d_.clock->Now();
    Tell(plan, c.gate, StepState::kRunning);
    if (d_.at_step) d_.at_step(static_cast<int>(c.gate + 1));
    waits.push_back(BeginGate(gate.unit, gate.As<HealthStep>()));
    chain_of.push_back(k);
  }
  PollGates(&waits, [&](size_t k) {
    ChainRun& c = chains[chain_of[k]];
    const Action& gate = plan.actions[c.gate];
    const Status& s = waits[k].status;
    if (!s.ok()) {
      Tell(plan, c.gate, StepState::kFailed, s.message());
      c.status = s.WithContext(StepName(c.gate, gate));
      c.failed = c.gate;
      return;
    }
    Tell(plan, c.gate, StepState::kDone, "", NoteHealthy(gate.unit, step_started_[c.start], r));
  });
  // Boot state of the services that came up.
  for (ChainRun& c : chains)
    for (size_t i = c.gate + 1; c.status.ok() && i <= c.last; ++i) {
      c.status = Step(plan, i, r);
      if (!c.status.ok()) c.failed = i;
    }
  Status first;
  std::string also;  // the other chains that failed
  int done = 0;
  for (ChainRun& c : chains) {
    done += static_cast<int>((c.status.ok() ? c.last + 1 : c.failed) - c.start);
    if (c.status.ok()) continue;
    if (first.ok()) {
      first = c.status;
      r->failed_step = static_cast<int>(c.failed + 1);
    } else {
      also += (also.empty() ? "" : "; ") + c.status.message();
    }
  }
  if (first.ok()) return first;
  if (!also.empty()) first = first.Append("; also failed: " + also);
  // Undo each failed change; the services that came up stay up (they did not need the others).
  bool all = true, any = false;
  for (ChainRun& c : chains) {
    if (c.status.ok() || !d_.rollback) continue;
    std::optional<bool> undone = Rollback(plan, c.failed, r);
    any = any || undone.has_value();
    all = all && undone.value_or(true);
  }
  r->rolled_back = any && all;
  r->steps_done = static_cast<int>(g.first) + done;
  return first;
}

Status Executor::RunDownloads(const Plan& plan, size_t first, size_t last, ExecResult* r) {
  std::vector<Status> results(last - first + 1);
  std::vector<ExecResult> partial(results.size());
  std::vector<std::thread> threads;
  for (size_t i = first; i <= last; ++i) Tell(plan, i, StepState::kRunning);
  if (d_.at_step) d_.at_step(static_cast<int>(first + 1));
  for (size_t i = first; i <= last; ++i) {
    threads.emplace_back([this, &plan, &results, &partial, first, i] {
      results[i - first] = Download(plan.actions[i].As<DownloadStep>(), &partial[i - first]);
    });
  }
  for (auto& t : threads) t.join();
  Status first_error;
  for (size_t i = first; i <= last; ++i) {
    const Status& s = results[i - first];
    Tell(plan, i, s.ok() ? StepState::kDone : StepState::kFailed, s.message());
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

std::optional<bool> Executor::Rollback(const Plan& plan, size_t failed, ExecResult* r) {
  const Action& f = plan.actions[failed];
  const Switch* sw =
      owner_[failed] >= 0 ? &plan.switches[static_cast<size_t>(owner_[failed])] : nullptr;
  // Its start or one of its gates failed; a gate of no switch of this plan may be one an
  // interrupted apply began (resumed below).
  // Behind a front, the route to it after its gates too: the old server stopped already.
  bool undoable =
      sw ? failed == sw->start ||
               std::find(sw->gates.begin(), sw->gates.end(), failed) != sw->gates.end() ||
               (f.kind == ActionKind::kRoute && failed > sw->start &&
                "service/" + f.As<FrontStep>().server == sw->address)
         : IsGate(f.kind);
  if (!undoable) return std::nullopt;
  // What the switch replaced (services stopped to make room for it, or, an in-place update,
  // the unit file it rewrote and restarted), as the journal keeps it (UndoList).
  const std::string address = sw ? sw->address : f.address;
  auto undo = std::find_if(undo_.begin(), undo_.end(),
                           [&](const SwitchUndo& u) { return u.address == address; });
  if (undo == undo_.end() || (undo->replaced.empty() && !undo->unit_before)) return std::nullopt;
  const SwitchUndo& u = *undo;
  const std::string& unit = u.unit;
  auto note = [&](const std::string& line) {
    r->rollback_log.push_back(line);
    Note("rollback: " + EscapeControl(line));
  };
  // The switch went dark at its first step in this run.
  Clock::TimePoint down = step_started_[sw && !sw->steps.empty() ? sw->steps.front() : failed];

  if (u.unit_before) {
    Status s = d_.unit_files->Write(unit, *u.unit_before).status();
    note("restore the unit file of " + unit + " that berth replaced" +
         (s.ok() ? "" : " failed: " + s.message()));
    if (s.ok()) {
      s = d_.systemd->Reload();
      note("daemon-reload" + (s.ok() ? "" : " failed: " + s.message()));
    }
    auto restarted = d_.clock->Now();
    if (s.ok()) {
      s = d_.systemd->Restart(unit, d_.job_timeout);
      note("restart " + unit + " on its previous unit file" +
           (s.ok() ? "" : " failed: " + s.message()));
    }
    bool back = s.ok() && BackHealthy(u.gate, unit, down, restarted, r);
    return RouteBack(u, back ? address : "", r) && back;
  }
  Status s = d_.systemd->Stop(unit, d_.job_timeout);
  note("stop " + unit + (s.ok() ? "" : " failed: " + s.message()));
  bool all = true;
  std::string serves;  // the first service the undo saw healthy again
  auto healthy = [&](const Replaced& x, bool ok) {
    if (ok && serves.empty()) serves = x.address;
    return ok;
  };
  for (const Replaced& x : u.replaced) {
    auto started = d_.clock->Now();
    // Put to sleep for the switch: woken, not started cold (a start when the sleep fell back
    // to a stop). A server that cannot be woken is stopped and started cold: a start job alone
    // would find it active and leave it asleep.
    if (x.asleep && !stopped_not_slept_.count(x.unit)) {
      Status woke =
          Status::FailedPrecondition(d_.standby ? "berth knows no port to reach it on"
                                                : "this berth cannot reach sleep-mode servers");
      if (d_.standby && x.wake.port) {
        woke = d_.standby->WakeUp(x.wake.host, x.wake.port, x.wake.timeout_ms);
        if (woke.ok()) woke = AwaitSleeping(x.wake, false);
      }
      note("wake " + x.unit + " (asleep since the switch)" +
           (woke.ok() ? "" : " failed: " + woke.message() + "; starting it cold"));
      if (woke.ok()) {
        all = healthy(x, BackHealthy(x.gate, x.unit, down, started, r)) && all;
        continue;
      }
      (void)d_.systemd->Stop(x.unit, d_.job_timeout);
    }
    Status st = d_.systemd->Start(x.unit, d_.job_timeout);
    note("start " + x.unit + " again" + (st.ok() ? "" : " failed: " + st.message()));
    all = healthy(x, st.ok() && BackHealthy(x.gate, x.unit, down, started, r)) && all;
  }
  return RouteBack(u, serves, r) && all;
}

bool Executor::RouteBack(const SwitchUndo& u, const std::string& serves, ExecResult* r) {
  if (!u.front_port || u.front_socket.empty()) return true;
  FrontStep front;
  front.port = u.front_port;
  front.socket = u.front_socket;
  std::string target = u.undo_route;
  // Never left holding (or on a server that no longer runs) while a server the undo brought back
  // is healthy: the front serves what runs.
  if ((target.empty() || target == kFrontHoldServer) && serves.rfind("service/", 0) == 0)
    target = serves.substr(std::string("service/").size());
  if (target.empty()) target = kFrontHoldServer;
  Status s = FrontSteps(d_.connect_front, d_.reload_front, d_.clock, [this](const std::string& l) {
               Note(l);
             }).RouteBack(front, target);
  std::string line = "route the front of port " + std::to_string(u.front_port) + " back to " +
                     target + (s.ok() ? "" : " failed: " + s.message());
  r->rollback_log.push_back(line);
  Note("rollback: " + EscapeControl(line));
  return s.ok();
}

uint64_t Executor::NoteHealthy(const std::string& unit, Clock::TimePoint started, ExecResult* r) {
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(d_.clock->Now() - started);
  uint64_t ms = static_cast<uint64_t>(std::max<int64_t>(0, took.count()));
  r->start_to_healthy_ms[unit] = ms;
  return ms;
}

bool Executor::BackHealthy(const HealthStep& gate, const std::string& unit, Clock::TimePoint down,
                           Clock::TimePoint started, ExecResult* r) {
  auto note = [&](const std::string& line) {
    r->rollback_log.push_back(line);
    Note("rollback: " + EscapeControl(line));
  };
  if (gate.port == 0) {
    note(unit + " runs again; berth knows no health check for it, so it did not wait for one");
    return true;
  }
  Status s = WaitHealthy(unit, gate);
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
    case ActionKind::kWriteUnit:
      return WriteUnit(a.unit, a.As<UnitFileStep>());
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
    case ActionKind::kEnable:
      return d_.systemd->Enable(a.unit);
    case ActionKind::kDisable:
      return d_.systemd->Disable(a.unit);
    case ActionKind::kWaitHealthy:
      return WaitHealthy(a.unit, a.As<HealthStep>());
    case ActionKind::kPreflight:
      return Preflight(a, a.As<PreflightStep>());
    case ActionKind::kFloor:
      return Floor(a.unit, a.As<FloorStep>(), result);
    case ActionKind::kReference:
      return Reference(a.unit, a.As<FloorStep>(), result);
    case ActionKind::kSmoke:
      return Smoke(a.unit, a.As<SmokeStep>());
    case ActionKind::kSoak:
      return Soak(a.unit, a.As<SoakStep>());
    case ActionKind::kWriteFront:
    case ActionKind::kRoute:
    case ActionKind::kDrain:
    case ActionKind::kReady:
      return Front(a.kind, a.As<FrontStep>());
    case ActionKind::kDownload: {
      ExecResult ignored;
      return Download(a.As<DownloadStep>(), result ? result : &ignored);
    }
    case ActionKind::kRemoveModel:
      return RemoveModel(a.As<RemoveModelStep>());
    case ActionKind::kPrewarm:
      return Prewarm(a, a.As<PrewarmStep>());
    case ActionKind::kSleep:
      return Sleep(a, a.As<StandbyStep>());
    case ActionKind::kWake:
      return Wake(a, a.As<StandbyStep>());
  }
  return Status::Internal("unknown action kind");
}

Status Executor::Prewarm(const Action& a, const PrewarmStep& p) {
  if (!d_.prewarm) {
    Note("prewarm of " + a.address + ": this berth cannot read files ahead; the start of " +
         a.unit + " reads them from disk");
    return Status::Ok();
  }
  // Progress as notes: at most one every 5 s, and the last.
  Clock::TimePoint next = d_.clock->Now();
  auto progress = [&](uint64_t done, uint64_t total) {
    Clock::TimePoint now = d_.clock->Now();
    if (now < next && done < total) return;
    next = now + std::chrono::seconds(5);
    Note("prewarm of " + a.address + ": " + FormatBytes(done) + " of " + FormatBytes(total) +
         " read");
  };
  Result<uint64_t> read = d_.prewarm(p, progress, d_.stop);
  if (!read.ok()) {
    Note("prewarm of " + a.address + " failed: " + read.status().message() + "; the start of " +
         a.unit + " reads what is not cached from disk");
    return Status::Ok();
  }
  Note("prewarm of " + a.address + ": " + FormatBytes(*read) + " read into the page cache");
  return Status::Ok();
}

Status Executor::AwaitSleeping(const StandbyStep& s, bool asleep) {
  const auto deadline = d_.clock->Now() + std::chrono::milliseconds(s.timeout_ms);
  Status last;
  while (true) {
    Result<bool> now =
        d_.standby->IsSleeping(s.host, s.port, std::min<uint64_t>(s.timeout_ms, 10000));
    if (now.ok() && *now == asleep) return Status::Ok();
    last = now.ok()
               ? Status::Unavailable(std::string("it says it is ") + (*now ? "asleep" : "awake"))
               : now.status();
    if (d_.clock->Now() >= deadline || (d_.stop && d_.stop->load())) break;
    d_.clock->SleepFor(std::chrono::milliseconds(200));
  }
  return Status::Unavailable(std::string("not ") + (asleep ? "asleep" : "awake") + " within " +
                             FormatDurationMs(s.timeout_ms) + ": " + last.message());
}

Status Executor::Sleep(const Action& a, const StandbyStep& s) {
  stopped_not_slept_.erase(a.unit);
  // What the plan counted on is the GPU memory: a sleep that fails or frees too little is a stop.
  auto stop_instead = [&](const std::string& why) {
    Note(a.address + ": " + why + "; stopping " + a.unit + " instead (standby lost)");
    stopped_not_slept_.insert(a.unit);
    return d_.systemd->Stop(a.unit, d_.job_timeout);
  };
  if (!d_.standby) return stop_instead("this berth cannot reach sleep-mode servers");
  Status slept = d_.standby->Sleep(s.host, s.port, s.level, s.timeout_ms);
  if (slept.ok()) slept = AwaitSleeping(s, true);
  if (!slept.ok()) return stop_instead("the sleep failed: " + slept.message());
  if (!d_.gpu_held) {
    Note(a.address + " is asleep; its GPU memory was not checked (no GPU observation here)");
    return Status::Ok();
  }
  // Before the next start counts on it: the unit's processes hold at most the residual.
  const auto deadline = d_.clock->Now() + d_.gpu_release_timeout;
  std::string over;
  while (true) {
    Result<std::map<int, uint64_t>> held = d_.gpu_held(a.unit);
    if (!held.ok()) {
      Note(a.address +
           " is asleep; its GPU memory could not be checked: " + held.status().message());
      return Status::Ok();
    }
    over.clear();
    std::string figures;
    for (int g : s.gpus) {
      auto it = held->find(g);
      uint64_t b = it == held->end() ? 0 : it->second;
      figures += (figures.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(g) + " " +
                 FormatBytes(b);
      if (b > s.residual_bytes)
        over += (over.empty() ? "" : ", ") + std::string("GPU ") + std::to_string(g) + " " +
                FormatBytes(b);
    }
    if (over.empty()) {
      Note(a.address + " is asleep; NVML: its processes hold " +
           (figures.empty() ? std::string("nothing") : figures) + " (at most " +
           FormatBytes(s.residual_bytes) + " each expected)");
      return Status::Ok();
    }
    if (d_.clock->Now() >= deadline || (d_.stop && d_.stop->load())) break;
    d_.clock->SleepFor(std::chrono::milliseconds(250));
  }
  return stop_instead("asleep, but NVML says its processes still hold " + over +
                      " (more than the " + FormatBytes(s.residual_bytes) +
                      " a sleeping server keeps) after " +
                      FormatDurationMs(static_cast<uint64_t>(d_.gpu_release_timeout.count())));
}

Status Executor::Wake(const Action& a, const StandbyStep& s) {
  Status woke = d_.standby
                    ? d_.standby->WakeUp(s.host, s.port, s.timeout_ms)
                    : Status::FailedPrecondition("this berth cannot reach sleep-mode servers");
  if (woke.ok()) woke = AwaitSleeping(s, false);
  if (woke.ok()) {
    Note(a.address + " is awake");
    return woke;
  }
  Note(a.address + ": the wake failed: " + woke.message() + "; restarting " + a.unit +
       " cold instead");
  return d_.systemd->Restart(a.unit, d_.job_timeout);
}

Status Executor::WriteUnit(const std::string& unit, const UnitFileStep& f) {
  return d_.unit_files->Write(unit, StampLineage(f.content, d_.lineage)).status();
}

Status Executor::Front(ActionKind kind, const FrontStep& f) {
  return FrontSteps(
             d_.connect_front, d_.reload_front, d_.clock,
             [this](const std::string& line) { Note(line); }, d_.commands)
      .Run(kind, f);
}

Status Executor::RemoveModel(const RemoveModelStep& m) {
  auto freed = d_.models->Remove(m.repo_id, m.commit);
  if (!freed.ok()) return freed.status();
  Note("removed " + m.repo_id + "@" + m.commit.substr(0, 7) + ", freed " + FormatBytes(*freed));
  return Status::Ok();
}

Status Executor::Download(const DownloadStep& d, ExecResult* result) {
  std::function<void(const PullProgress&)> on_progress;
  if (!d_.observers.empty())
    on_progress = [this](const PullProgress& p) {
      for (StepObserver* o : d_.observers) o->OnDownload(p, false);
    };
  auto r = d_.models->Download(d, d_.stop, on_progress);
  if (!r.ok()) return r.status();
  if (d_.on_downloaded) d_.on_downloaded(d.repo_id, r->commit);
  result->downloaded.emplace_back(d.repo_id, r->commit);
  result->bytes_downloaded += r->bytes_fetched;
  PullProgress p;
  p.repo_id = d.repo_id;
  p.bytes_done = p.bytes_total = r->bytes_total;
  p.bytes_fetched = r->bytes_fetched;
  p.files_done = p.files_total = r->files;
  p.seconds = r->seconds;
  for (StepObserver* o : d_.observers) o->OnDownload(p, true);
  return Status::Ok();
}

std::string Executor::JournalTail(const std::string& unit) {
  if (!d_.journal) return "";
  std::string out;
  // The service's own lines: each stays one line, its controls and stray bytes shown as \xNN.
  for (const auto& line : d_.journal->Tail(unit, 15)) out += "\n    " + EscapeLine(line);
  return out.empty() ? "" : "\n  last journal lines of " + unit + ":" + out;
}

std::optional<Status> Executor::ProbeOnce(const std::string& unit, const HealthStep& h,
                                          uint32_t base_restarts, std::string* last) {
  // A crash loop fails fast: the unit must stay up while it loads.
  auto props = d_.systemd->GetUnits({unit});
  if (!props.ok()) return props.status();
  const UnitProperties& p = (*props)[0];
  if (p.active_state == "failed" || p.active_state == "inactive") {
    return Status::FailedPrecondition(
        unit + " stopped while berth waited for it to become healthy (" + p.active_state +
        ", Result=" + p.result + ", exit status " + std::to_string(p.exec_main_status) +
        "); last probe: " + *last + JournalTail(unit));
  }
  if (p.sub_state == "auto-restart" || p.n_restarts > base_restarts) {
    return Status::FailedPrecondition(
        unit + " exited (Result=" + p.result + ", exit status " +
        std::to_string(p.exec_main_status) +
        ") and systemd is restarting it instead of it becoming healthy" + JournalTail(unit));
  }
  HealthResult seen = d_.health->Probe(DialAddress(h.host), h.port, h.path, h.served_name);
  if (seen.healthy) return Status::Ok();
  *last = seen.detail;
  return std::nullopt;
}

Executor::GateWait Executor::BeginGate(const std::string& unit, const HealthStep& gate) {
  GateWait w;
  w.unit = unit;
  w.gate = &gate;
  if (auto props = d_.systemd->GetUnits({unit}); props.ok() && !props->empty())
    w.base_restarts = (*props)[0].n_restarts;
  w.deadline = d_.clock->Now() + std::chrono::milliseconds(gate.timeout_ms);
  w.interval = std::chrono::milliseconds(gate.interval_ms ? gate.interval_ms : 1000);
  // The first probes come quickly: a small model is up in a second or two.
  w.wait = std::min(w.interval, std::chrono::milliseconds(200));
  w.due = d_.clock->Now();
  return w;
}

void Executor::PollGates(std::vector<GateWait>* waits, const std::function<void(size_t)>& ended) {
  for (;;) {
    bool any = false;
    Clock::TimePoint next = Clock::TimePoint::max();
    for (size_t k = 0; k < waits->size(); ++k) {
      GateWait& w = (*waits)[k];
      if (!w.waiting) continue;
      if (d_.clock->Now() >= w.due) {
        const HealthStep& gate = *w.gate;
        std::optional<Status> verdict = ProbeOnce(w.unit, gate, w.base_restarts, &w.last_probe);
        if (!verdict && d_.clock->Now() >= w.deadline)
          verdict = Status::Unavailable(w.unit + " did not become healthy within " +
                                        FormatDurationMs(gate.timeout_ms) +
                                        "; last probe: " + w.last_probe + JournalTail(w.unit));
        if (verdict) {
          w.waiting = false;
          w.status = *verdict;
          if (ended) ended(k);
          continue;
        }
        w.due = d_.clock->Now() + w.wait;
        w.wait = std::min(w.interval, w.wait * 2);
      }
      any = true;
      next = std::min(next, w.due);
    }
    if (!any) return;
    auto now = d_.clock->Now();
    if (next > now)
      d_.clock->SleepFor(std::chrono::duration_cast<std::chrono::milliseconds>(
          next - now + std::chrono::microseconds(999)));
  }
}

Status Executor::WaitHealthy(const std::string& unit, const HealthStep& h) {
  std::vector<GateWait> one = {BeginGate(unit, h)};
  PollGates(&one, nullptr);
  return one[0].status;
}

}  // namespace berth
