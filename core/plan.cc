#include "core/plan.h"

#include <algorithm>
#include <set>
#include <utility>

namespace berth {

const char* ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kDownload:
      return "download";
    case ActionKind::kRemoveModel:
      return "remove-model";
    case ActionKind::kWriteUnit:
      return "write-unit";
    case ActionKind::kRemoveUnit:
      return "remove-unit";
    case ActionKind::kDaemonReload:
      return "daemon-reload";
    case ActionKind::kStart:
      return "start";
    case ActionKind::kStop:
      return "stop";
    case ActionKind::kRestart:
      return "restart";
    case ActionKind::kWaitHealthy:
      return "wait-healthy";
    case ActionKind::kEnable:
      return "enable";
    case ActionKind::kDisable:
      return "disable";
    case ActionKind::kPreflight:
      return "preflight";
    case ActionKind::kSmoke:
      return "smoke";
    case ActionKind::kFloor:
      return "floor";
    case ActionKind::kSoak:
      return "soak";
    case ActionKind::kReference:
      return "reference";
    case ActionKind::kWriteFront:
      return "write-front";
    case ActionKind::kRoute:
      return "route";
    case ActionKind::kDrain:
      return "drain";
    case ActionKind::kReady:
      return "ready";
    case ActionKind::kPrewarm:
      return "prewarm";
    case ActionKind::kSleep:
      return "sleep";
    case ActionKind::kWake:
      return "wake";
  }
  return "?";
}

StepPayload PayloadFor(ActionKind k) {
  switch (k) {
    case ActionKind::kDownload:
      return DownloadStep{};
    case ActionKind::kRemoveModel:
      return RemoveModelStep{};
    case ActionKind::kWriteUnit:
      return UnitFileStep{};
    case ActionKind::kRemoveUnit:
    case ActionKind::kStart:
    case ActionKind::kStop:
    case ActionKind::kRestart:
    case ActionKind::kEnable:
    case ActionKind::kDisable:
      return ServiceStep{};
    case ActionKind::kWaitHealthy:
      return HealthStep{};
    case ActionKind::kPreflight:
      return PreflightStep{};
    case ActionKind::kSmoke:
      return SmokeStep{};
    case ActionKind::kFloor:
    case ActionKind::kReference:
      return FloorStep{};
    case ActionKind::kSoak:
      return SoakStep{};
    case ActionKind::kWriteFront:
    case ActionKind::kRoute:
    case ActionKind::kDrain:
    case ActionKind::kReady:
      return FrontStep{};
    case ActionKind::kPrewarm:
      return PrewarmStep{};
    case ActionKind::kSleep:
    case ActionKind::kWake:
      return StandbyStep{};
    case ActionKind::kDaemonReload:
      break;
  }
  return std::monostate{};
}

bool PayloadFits(ActionKind k, const StepPayload& step) {
  return PayloadFor(k).index() == step.index();
}

Action MakeAction(ActionKind k, std::string address, Reason reason) {
  Action a;
  a.kind = k;
  a.address = std::move(address);
  a.reason = reason;
  a.step = PayloadFor(k);
  return a;
}

const char* SwitchModeName(SwitchMode m) {
  switch (m) {
    case SwitchMode::kFresh:
      return "fresh";
    case SwitchMode::kStartFirst:
      return "start-first";
    case SwitchMode::kStopFirst:
      return "stop-first";
    case SwitchMode::kInPlace:
      return "in-place";
    case SwitchMode::kMakeBeforeBreak:
      return "make-before-break";
    case SwitchMode::kHold:
      return "hold";
  }
  return "?";
}

bool IsGate(ActionKind k) {
  return k == ActionKind::kWaitHealthy || k == ActionKind::kSmoke || k == ActionKind::kFloor ||
         k == ActionKind::kSoak;
}

const char* ReasonName(Reason r) {
  switch (r) {
    case Reason::kModelMissing:
      return "model_missing";
    case Reason::kModelPartial:
      return "model_partial";
    case Reason::kRevisionChanged:
      return "revision_changed";
    case Reason::kUnitMissing:
      return "unit_missing";
    case Reason::kUnitChanged:
      return "unit_changed";
    case Reason::kUnitDrift:
      return "unit_drift";
    case Reason::kUnitAdopted:
      return "unit_adopted";
    case Reason::kUnitFilesChanged:
      return "unit_files_changed";
    case Reason::kPendingReload:
      return "pending_reload";
    case Reason::kNotRunning:
      return "not_running";
    case Reason::kFailed:
      return "failed";
    case Reason::kConfigChanged:
      return "config_changed";
    case Reason::kModelUpdated:
      return "model_updated";
    case Reason::kWantedStopped:
      return "wanted_stopped";
    case Reason::kWantedAbsent:
      return "wanted_absent";
    case Reason::kNotInManifest:
      return "not_in_manifest";
    case Reason::kFreesResources:
      return "frees_resources";
    case Reason::kHealthGate:
      return "health_gate";
    case Reason::kNotUsed:
      return "not_used";
    case Reason::kOldRevision:
      return "old_revision";
    case Reason::kNotEnabled:
      return "not_enabled";
    case Reason::kPreflight:
      return "preflight";
    case Reason::kSmokeGate:
      return "smoke_gate";
    case Reason::kFloorGate:
      return "floor_gate";
    case Reason::kSoakGate:
      return "soak_gate";
    case Reason::kInterruptedSwitch:
      return "interrupted_switch";
    case Reason::kEngineCheck:
      return "engine_check";
    case Reason::kFloorReference:
      return "floor_reference";
    case Reason::kPrewarm:
      return "prewarm";
    case Reason::kStandby:
      return "standby";
    case Reason::kAsleep:
      return "asleep";
    case Reason::kStandbyEvicted:
      return "standby_evicted";
  }
  return "?";
}

namespace {

// The chain that starts at `i` (a start or restart, its gate, boot actions): its last step,
// or `i - 1` (empty) when the step cannot head a side-by-side chain.
size_t ChainEnd(const Plan& plan, size_t i) {
  const auto& acts = plan.actions;
  const Action& a = acts[i];
  if ((a.kind != ActionKind::kStart && a.kind != ActionKind::kRestart) ||
      a.As<ServiceStep>().gpus.empty())
    return i - 1;
  if (i + 1 >= acts.size() || acts[i + 1].kind != ActionKind::kWaitHealthy ||
      acts[i + 1].unit != a.unit || acts[i + 1].As<HealthStep>().port == 0)
    return i - 1;
  size_t last = i + 1;
  // The gates after the health gate (smoke) belong to the chain: they run once it is healthy.
  while (last + 1 < acts.size() && IsGate(acts[last + 1].kind) && acts[last + 1].unit == a.unit)
    ++last;
  while (last + 1 < acts.size() && (acts[last + 1].kind == ActionKind::kEnable ||
                                    acts[last + 1].kind == ActionKind::kDisable))
    ++last;
  return last;
}

}  // namespace

std::vector<ParallelGroup> ParallelStarts(const Plan& plan) {
  std::vector<ParallelGroup> groups;
  ParallelGroup g;
  std::set<int> gpus, ports;
  auto close = [&] {
    if (g.chains.size() >= 2) groups.push_back(g);
    g = {};
    gpus.clear();
    ports.clear();
  };
  for (size_t i = 0; i < plan.actions.size();) {
    size_t end = ChainEnd(plan, i);
    if (end + 1 == i) {  // not a chain: it ends any group
      close();
      ++i;
      continue;
    }
    const Action& start = plan.actions[i];
    std::set<int> my_ports(start.requires_.ports.begin(), start.requires_.ports.end());
    my_ports.insert(plan.actions[i + 1].As<HealthStep>().port);
    const std::vector<int>& my_gpus = start.As<ServiceStep>().gpus;
    bool clash = false;
    for (int x : my_gpus) clash = clash || gpus.count(x);
    for (int p : my_ports) clash = clash || ports.count(p);
    if (clash) close();
    if (g.chains.empty()) g.first = i;
    g.chains.push_back({i, i + 1, end});
    g.last = end;
    gpus.insert(my_gpus.begin(), my_gpus.end());
    ports.insert(my_ports.begin(), my_ports.end());
    i = end + 1;
  }
  close();
  return groups;
}

}  // namespace berth
