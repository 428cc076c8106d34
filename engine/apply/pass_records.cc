#include "engine/apply/pass_records.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "core/front.h"
#include "core/gate_figures.h"
#include "core/unit_marker.h"

namespace berth {

void Record(const Plan& plan, const Journal& journal, const ExecResult& exec, State* st) {
  for (const JournalEntry& e : journal.entries) {
    if (e.status != "done") continue;
    const Action& a = plan.actions[static_cast<size_t>(e.step - 1)];
    switch (a.kind) {
      case ActionKind::kWriteUnit:
        if (std::find(st->units.begin(), st->units.end(), a.unit) == st->units.end())
          st->units.push_back(a.unit);
        st->applied[a.address] = UnitSpecHash(a.As<UnitFileStep>().content);
        break;
      case ActionKind::kRemoveUnit:
        std::erase(st->units, a.unit);
        st->applied.erase("unit/" + a.unit);
        st->gate_figures.erase(a.unit);
        st->start_invocations.erase(a.unit);
        break;
      case ActionKind::kRemoveModel: {
        const RemoveModelStep& m = a.As<RemoveModelStep>();
        auto& commits = st->models[m.repo_id];
        std::erase(commits, m.commit);
        if (commits.empty()) st->models.erase(m.repo_id);
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
    if (a.kind == ActionKind::kDownload && !a.As<DownloadStep>().commit.empty())
      st->applied[a.address] = a.As<DownloadStep>().commit;
  // How long each start took to pass its health gate: the next plan estimates its dark windows.
  for (const auto& [unit, ms] : exec.start_to_healthy_ms) st->RecordStartTime(unit, ms);
  // And each stop: a server draining its requests keeps a stop-first switch's port dark.
  for (const auto& [unit, ms] : exec.stop_ms) st->RecordStopTime(unit, ms);
  // What each floor and reference measured: a later relative floor's reference when that
  // service cannot be measured.
  for (const GateFigures& g : exec.gate_figures) RecordGateFigures(&st->gate_figures[g.unit], g);
}

bool RecordRequestStarts(const Desired& d, const Observed& o, State* st) {
  std::unordered_map<std::string_view, const ObservedUnit*> units;  // built at the first
  bool added = false;
  for (const auto& [name, s] : d.services) {
    if (!s.on_demand) continue;
    if (units.empty())
      for (const ObservedUnit& u : o.units) units.emplace(u.name, &u);
    auto u = units.find(s.UnitName());
    if (u != units.end() && st->RecordObservedStart(*u->second)) added = true;
  }
  return added;
}

bool FailureHoldsTheChange(const Plan& plan, size_t i) {
  const Action& a = plan.actions[i];
  return a.takes_down || a.kind == ActionKind::kStart || a.kind == ActionKind::kRestart ||
         a.kind == ActionKind::kWake || IsGate(a.kind);
}

void CountUp(const Desired& d, const Observed& o, RunReport* r) {
  r->services_up = 0;
  r->services_wanted = 0;
  r->service_up.clear();
  r->crash_looping.clear();
  r->restarts.clear();
  r->observed = true;
  // The units by name alone (a PlanIndex indexes everything the planner looks up).
  std::unordered_map<std::string_view, const ObservedUnit*> units;
  units.reserve(o.units.size());
  for (const ObservedUnit& u : o.units) units.emplace(u.name, &u);
  for (const auto& [n, s] : d.services) {
    if (s.state != ServiceState::kRunning) continue;
    ++r->services_wanted;
    auto found = units.find(s.UnitName());
    const ObservedUnit* u = found == units.end() ? nullptr : found->second;
    bool up = u && u->IsUp();  // a crash-looping unit is not up, even while it runs
    r->service_up[n] = up;
    r->restarts[n] = u ? u->n_restarts : 0;
    if (u && u->crash_looping) r->crash_looping[n] = CrashLoopDetail(*u);
    if (up) ++r->services_up;
  }
}

}  // namespace berth
