#include "planners/dark_windows.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

namespace berth {
namespace {

// a + b, at most UINT64_MAX: the times come from a saved observation too, which is untrusted.
uint64_t Plus(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

std::vector<uint64_t> Recorded(const Observed& o, const std::string& unit) {
  auto it = o.state.start_times_ms.find(unit);
  return it == o.state.start_times_ms.end() ? std::vector<uint64_t>{} : it->second;
}

// The stop (or restart) that begins the window: who, how long its stops took, its timeout
// (`units`: name -> the unit as observed).
void StopOf(const Observed& o, const std::unordered_map<std::string, const ObservedUnit*>& units,
            const Action& first, DarkEstimate* e) {
  if (first.kind != ActionKind::kStop && first.kind != ActionKind::kRestart) return;
  e->stop_unit = first.unit;
  if (first.kind == ActionKind::kStop)
    if (auto it = o.state.stop_times_ms.find(first.unit); it != o.state.stop_times_ms.end())
      e->stop_samples_ms = it->second;
  if (auto it = units.find(first.unit); it != units.end()) {
    uint64_t usec = it->second->timeout_stop_usec;
    e->stop_timeout_ms = usec == ObservedUnit::kNoStopTimeout ? usec : usec / 1000;
  }
}

// What the executor's rollback starts again, in its order, before the port of `d` serves again
// when the switch whose gate ends it fails: the services it stopped to make room (up to the one
// that served this port), or the unit itself on its previous file (an in-place update).
// `gate_of`: step -> the first switch with that step among its gates.
std::vector<RollbackStart> RollbackOf(const Observed& o, const Plan& plan, const Disruption& d,
                                      const std::unordered_map<size_t, size_t>& gate_of) {
  std::vector<RollbackStart> out;
  const size_t from = d.from_step;
  const size_t until = *d.until_step;
  if (auto it = gate_of.find(until); it != gate_of.end()) {
    const Switch& sw = plan.switches[it->second];
    bool stopped_for_it = std::any_of(sw.replaces.begin(), sw.replaces.end(),
                                      [&](const Replaced& r) { return r.stop_step == from; });
    if (stopped_for_it) {
      for (const Replaced& r : sw.replaces)
        if (r.stop_step <= from)
          out.push_back({r.unit, Recorded(o, r.unit), r.gate.port ? r.gate.timeout_ms : 0});
      return out;
    }
    // An in-place update: the executor restores the unit file it replaced and restarts it.
    if (sw.start == from && sw.restores_unit) {
      const Action& gate = plan.actions[until];
      if (gate.kind == ActionKind::kWaitHealthy)
        out.push_back({sw.unit, Recorded(o, sw.unit), gate.As<HealthStep>().timeout_ms});
    }
    return out;
  }
  return out;
}

}  // namespace

uint64_t MedianMs(std::vector<uint64_t> ms) {
  if (ms.empty()) return 0;
  std::sort(ms.begin(), ms.end());
  size_t mid = ms.size() / 2;
  if (ms.size() % 2 == 1) return ms[mid];
  return ms[mid - 1] + (ms[mid] - ms[mid - 1]) / 2;
}

void EstimateDarkWindows(const Observed& observed, Plan* plan) {
  const std::vector<Action>& actions = plan->actions;
  std::unordered_map<size_t, size_t> gate_of;
  for (size_t k = 0; k < plan->switches.size(); ++k)
    for (size_t g : plan->switches[k].gates) gate_of.emplace(g, k);
  std::unordered_map<std::string, const ObservedUnit*> units;
  if (!plan->disruptions.empty())
    for (const ObservedUnit& u : observed.units) units.emplace(u.name, &u);
  for (Disruption& d : plan->disruptions) {
    if (!d.until_step || *d.until_step >= actions.size() || d.from_step > *d.until_step) continue;
    const Action& gate = actions[*d.until_step];
    if (gate.kind != ActionKind::kWaitHealthy) continue;  // ends without a gate: no estimate
    DarkEstimate e;
    e.gate_unit = gate.unit;
    e.samples_ms = Recorded(observed, gate.unit);
    StopOf(observed, units, actions[d.from_step], &e);
    if (!e.samples_ms.empty())
      e.expected_ms = Plus(MedianMs(e.samples_ms), MedianMs(e.stop_samples_ms));
    e.gate_timeout_ms = gate.As<HealthStep>().timeout_ms;
    e.rollback = RollbackOf(observed, *plan, d, gate_of);
    e.worst_ms = e.gate_timeout_ms;
    if (e.stop_timeout_ms != ObservedUnit::kNoStopTimeout)
      e.worst_ms = Plus(e.worst_ms, e.stop_timeout_ms);
    for (const RollbackStart& r : e.rollback)
      e.worst_ms = Plus(e.worst_ms, r.samples_ms.empty() ? r.timeout_ms
                                                         : *std::max_element(r.samples_ms.begin(),
                                                                             r.samples_ms.end()));
    d.estimate = std::move(e);
  }
}

}  // namespace berth
