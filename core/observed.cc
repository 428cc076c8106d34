#include "core/observed.h"

#include <algorithm>
#include <string>

namespace berth {

std::optional<uint64_t> LastStartMs(uint64_t inactive_exit_usec, uint64_t active_enter_usec) {
  if (inactive_exit_usec == 0 || active_enter_usec < inactive_exit_usec) return std::nullopt;
  uint64_t ms = (active_enter_usec - inactive_exit_usec) / 1000;
  if (ms > kMaxStartMs) return std::nullopt;
  return ms;
}

std::optional<uint64_t> UnrecordedStart(const ObservedUnit& u, const std::string& berth_started,
                                        const std::string& recorded) {
  if (!u.last_start_ms || u.invocation_id.empty() || u.invocation_id == berth_started ||
      u.invocation_id == recorded)
    return std::nullopt;
  return u.last_start_ms;
}

std::optional<uint64_t> BerthState::UnrecordedStart(const ObservedUnit& u) const {
  auto started_it = started.find(u.name);
  auto recorded_it = start_invocations.find(u.name);
  return berth::UnrecordedStart(
      u, started_it == started.end() ? std::string() : started_it->second.first,
      recorded_it == start_invocations.end() ? std::string() : recorded_it->second);
}

bool IsCrashLooping(const ObservedUnit& u, uint64_t now_usec) {
  if (u.load_state == "not-found") return false;
  if (u.sub_state.rfind("auto-restart", 0) == 0) return true;  // also auto-restart-queued
  if (u.active_state == "failed") return u.GaveUp();
  if (u.n_restarts == 0 || !u.IsActive()) return false;
  if (u.active_state == "activating") return true;  // starting again after a crash
  if (now_usec == 0 || u.active_enter_usec == 0) return false;
  return now_usec < u.active_enter_usec + kCrashLoopSettleUsec;
}

void MarkCrashLoops(std::vector<ObservedUnit>* units, uint64_t now_usec) {
  for (ObservedUnit& u : *units) u.crash_looping = IsCrashLooping(u, now_usec);
}

std::string CrashLoopDetail(const ObservedUnit& u) {
  // Its first crash: systemd counts a restart only once it begins (NRestarts), after RestartSec.
  if (u.n_restarts == 0 && u.sub_state.rfind("auto-restart", 0) == 0) {
    std::string how =
        u.result == "signal"      ? "killed by signal " + std::to_string(u.exec_main_status)
        : u.result == "exit-code" ? "exit status " + std::to_string(u.exec_main_status)
                                  : (u.result.empty() ? "failed" : u.result);
    return "exited (" + how + "), systemd restarts it after RestartSec=, now " + u.active_state +
           "/" + u.sub_state;
  }
  std::string out = "restarted " + std::to_string(u.n_restarts) +
                    (u.n_restarts == 1 ? " time" : " times") + " by systemd";
  if (u.active_state == "failed")
    return out + ", then systemd gave up (" + (u.result.empty() ? "failed" : u.result) + ")";
  return out + ", now " + u.active_state + "/" + u.sub_state;
}

const ObservedUnit* Observed::FindUnit(const std::string& name) const {
  for (const auto& u : units)
    if (u.name == name) return &u;
  return nullptr;
}

bool Observed::Owns(const ObservedUnit& u) const {
  if (!u.managed) return false;
  if (!u.lineage.empty()) return !state.lineage.empty() && u.lineage == state.lineage;
  return std::find(state.units.begin(), state.units.end(), u.name) != state.units.end();
}

const ObservedRepo* Observed::FindRepo(const std::string& repo_id) const {
  for (const auto& r : store.repos)
    if (r.repo_id == repo_id) return &r;
  return nullptr;
}

const HubInfo* Observed::FindHub(const std::string& repo_id, const std::string& revision) const {
  for (const auto& h : hub)
    if (h.repo_id == repo_id && (h.revision == revision || h.commit == revision)) return &h;
  return nullptr;
}

const ObservedGpu* Observed::FindGpu(int index) const {
  for (const auto& g : gpus)
    if (g.index == index) return &g;
  return nullptr;
}

}  // namespace berth
