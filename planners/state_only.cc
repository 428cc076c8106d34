#include "planners/state_only.h"

#include <algorithm>

#include "planners/draft.h"
#include "planners/plan_index.h"

namespace berth {
namespace {

// What the unit of `s` holds now: its listening ports and GPU memory (nothing when it does
// not run, or when that part of the host could not be observed).
LearnedService HeldNow(const ServiceSpec& s, const PlanIndex& index) {
  LearnedService now;
  const Observed& o = index.observed();
  const ObservedUnit* u = index.Unit(s.UnitName());
  if (!u || !u->IsActive()) return now;
  if (o.ports_known) {
    now.ports = index.PortsOf(u->name);
    std::sort(now.ports.begin(), now.ports.end());
    now.ports.erase(std::unique(now.ports.begin(), now.ports.end()), now.ports.end());
  }
  if (o.gpus_known) now.gpu_bytes = index.GpuBytesOf(u->name);
  return now;
}

// `seen` over `into`, part by part: what was not seen is kept.
void Merge(const LearnedService& seen, LearnedService* into) {
  if (!seen.ports.empty()) into->ports = seen.ports;
  if (!seen.gpu_bytes.empty()) into->gpu_bytes = seen.gpu_bytes;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return out;
}

}  // namespace

bool LearnStateOnly(const Desired& d, const Observed& o,
                    std::map<std::string, LearnedService>* learned) {
  const PlanIndex index(o);
  bool changed = false;
  for (const auto& [name, s] : d.services) {
    if (s.has_engine) continue;
    LearnedService now = HeldNow(s, index);
    if (now.ports.empty() && now.gpu_bytes.empty()) continue;
    LearnedService merged =
        learned->count(s.UnitName()) ? learned->at(s.UnitName()) : LearnedService{};
    Merge(now, &merged);
    auto it = learned->find(s.UnitName());
    if (it != learned->end() && it->second == merged) continue;
    (*learned)[s.UnitName()] = merged;
    changed = true;
  }
  return changed;
}

Desired ResolveStateOnly(const Desired& d, const PlanIndex& index, Draft* draft) {
  const Observed& o = index.observed();
  Desired out = d;
  for (auto& [name, s] : out.services) {
    if (s.has_engine) continue;
    LearnedService facts;
    auto it = o.state.learned.find(s.UnitName());
    if (it != o.state.learned.end()) facts = it->second;
    Merge(HeldNow(s, index), &facts);

    std::vector<std::string> declared, seen, unknown;
    if (s.port) {
      declared.push_back("port");
    } else if (!facts.ports.empty()) {
      s.port = facts.ports.front();
      seen.push_back("port");
    } else {
      unknown.push_back("port");
    }
    if (!s.gpus.empty()) {
      declared.push_back("GPUs");
    } else if (!facts.gpu_bytes.empty()) {
      for (const auto& [i, b] : facts.gpu_bytes) s.gpus.push_back(i);
      seen.push_back("GPUs");
    } else {
      unknown.push_back("GPUs");
    }
    if (s.gpu_memory) {
      declared.push_back("GPU memory");
    } else if (!s.gpus.empty()) {
      bool any = false;
      uint64_t most = 0;
      for (int i : s.gpus) {
        auto b = facts.gpu_bytes.find(i);
        if (b == facts.gpu_bytes.end()) continue;
        any = true;
        most = std::max(most, b->second);
      }
      if (any) {
        s.gpu_memory = most;
        seen.push_back("GPU memory");
      } else {
        unknown.push_back("GPU memory");
        s.strategy = Strategy::kStopFirst;
      }
    }

    StateOnlyWords& w = draft->state_only[name];
    std::vector<std::string> known;
    if (!declared.empty()) known.push_back(Join(declared) + " from the manifest");
    if (!seen.empty()) known.push_back(Join(seen) + " as berth saw it run");
    w.known = "no engine" + (known.empty() ? std::string() : ": " + Join(known));
    const std::string who = "service/" + name;
    const std::string declare = " (" + s.loc.ToString() + ")";
    if (!s.port && s.gpus.empty()) {
      w.unknown = who + " has no engine and berth has never seen it run: its port and GPUs are " +
                  "unknown, so nothing that holds them is stopped before it starts and no " +
                  "health gate follows its start. Declare port:, gpus: and gpu_memory: on it" +
                  declare;
    } else if (!s.port) {
      w.unknown = who + " has no engine and berth has never seen it listen: its port is " +
                  "unknown, so nothing that holds a port is stopped for it and no health gate " +
                  "follows its start. Declare port: on it" + declare;
    } else if (s.gpus.empty()) {
      w.unknown = who + " has no engine and berth has never seen it on a GPU: its GPUs are " +
                  "unknown, so nothing is stopped to make room for it. Declare gpus: and " +
                  "gpu_memory: on it" + declare;
    } else if (!s.gpu_memory) {
      w.unknown = who + " has no engine and its GPU memory is unknown: what this plan stops " +
                  "on its GPUs stops before it starts. Declare gpu_memory: on it" + declare;
    }
  }
  return out;
}

}  // namespace berth
