#include "planners/prewarm.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "core/hf_cache.h"
#include "core/units.h"
#include "planners/gates.h"
#include "planners/planner.h"

namespace berth {
namespace {

// Whether a switch of this mode takes its service (or the port's old one) down before the new
// server starts: its start is the dark window a prewarm shortens.
bool GoesDark(SwitchMode m) {
  return m == SwitchMode::kStopFirst || m == SwitchMode::kInPlace || m == SwitchMode::kHold;
}

// The bytes llama-server reads of `file` in the model's snapshot in the store: its tensors, as
// the store scan read them (ReadGgufModels); nullopt when not read.
std::optional<uint64_t> GgufBytes(const ResolvedModel& m, const std::string& file) {
  if (!m.present || !m.present->gguf) return std::nullopt;
  auto it = m.present->gguf->find(file);
  if (it == m.present->gguf->end() || !it->second.model || !it->second.model->problem.empty())
    return std::nullopt;
  return it->second.model->TensorBytes();
}

}  // namespace

uint64_t PrewarmMargin(uint64_t memory_total) {
  return std::max<uint64_t>(memory_total / 10, uint64_t{2} << 30);
}

void PlanPrewarms(const Desired& desired, const Observed& observed,
                  const std::vector<ResolvedModel>& models, Plan* plan) {
  const ObservedMemory& mem = observed.memory;
  const uint64_t margin = mem.known ? PrewarmMargin(mem.total_bytes) : 0;
  // What the plan's sleeps keep in host memory (placed by the sequence) and its earlier
  // prewarms read: the memory ledger.
  uint64_t claimed = 0;
  for (const Action& a : plan->actions)
    if (a.kind == ActionKind::kSleep) claimed += a.As<StandbyStep>().memory_bytes;
  std::map<std::string, size_t> read_by;  // snapshot -> the index of the prewarm reading it
  // Switches in plan order; each insertion moves the later switches' steps (InsertActions).
  for (size_t k = 0; k < plan->switches.size(); ++k) {
    const Switch& sw = plan->switches[k];
    if (!GoesDark(sw.mode) || sw.steps.empty()) continue;
    if (plan->actions[sw.start].kind == ActionKind::kWake) {
      plan->notes.push_back({sw.address,
                             "it wakes from sleep: its weights are in host memory already",
                             "no prewarm"});
      continue;
    }
    const std::string name = sw.address.substr(sw.address.find('/') + 1);
    auto s = desired.services.find(name);
    if (s == desired.services.end() || !s->second.has_engine || s->second.model.empty()) continue;
    const ServiceSpec& svc = s->second;
    const ResolvedModel* m = FindResolved(models, svc.model);
    if (!m) continue;
    auto why_not = [&](const std::string& why) {
      plan->notes.push_back({sw.address, why, "no prewarm"});
    };
    if (!desired.host.prewarm) {
      why_not("host.prewarm is false (" + desired.host.loc.ToString() + ")");
      continue;
    }
    if (m->commit.empty()) {
      why_not("the commit of model/" + svc.model + " is not known (offline, not in the store)");
      continue;
    }
    // llama-server maps its GGUF file and reads the pages as it touches them: from the page
    // cache that is memory speed, from a cold disk the whole file at disk speed.
    const bool gguf = svc.engine == EngineKind::kLlamaServer;
    const std::string file = gguf ? svc.llama.model_file : "";
    const std::string what = gguf ? "GGUF file " + file : std::string("safetensors weights");
    std::optional<uint64_t> size = m->weights_bytes;
    if (gguf) size = GgufBytes(*m, file);
    if (!size || *size == 0) {
      why_not(gguf ? "berth has not read the size of the GGUF file " + file + " of model/" +
                         svc.model + " (it reads it once the snapshot is in the store)"
                   : "berth does not know the size of the safetensors weights of model/" +
                         svc.model + " (neither the store nor the Hub listed them)");
      continue;
    }
    const std::string snapshot =
        SnapshotPath(StorePath(desired, observed), m->spec->repo_id, m->commit);
    if (auto r = read_by.find(snapshot + "/" + file); r != read_by.end()) {
      why_not("step " + std::to_string(r->second + 1) +
              " reads the same weights into the page cache");
      continue;
    }
    const uint64_t weights = *size;
    uint64_t resident = 0;
    if (!gguf && m->present && m->present->resident_bytes)
      resident = std::min(*m->present->resident_bytes, weights);
    if (!mem.known) {
      why_not("host memory was not observed (" +
              (mem.error.empty() ? std::string("a saved observation without it") : mem.error) +
              "): berth cannot tell whether the " + FormatBytes(weights) +
              " of weights fit in the page cache");
      continue;
    }
    if (resident >= weights - weights / 20) {
      why_not("the page cache holds " + FormatBytes(resident) + " of its " + FormatBytes(weights) +
              " of weights already");
      continue;
    }
    const uint64_t need = weights - resident;
    const uint64_t room =
        mem.available_bytes > margin + claimed ? mem.available_bytes - margin - claimed : 0;
    if (need > room) {
      why_not("its " + FormatBytes(need) + " of weights to read do not fit in the " +
              FormatBytes(mem.available_bytes) + " of memory available" +
              (claimed
                   ? " (" + FormatBytes(claimed) + " of it taken by earlier prewarms and sleeps)"
                   : std::string()) +
              ", less a margin of " + FormatBytes(margin) +
              "; its start reads them from disk while the port is dark");
      continue;
    }
    claimed += need;
    size_t first = *std::min_element(sw.steps.begin(), sw.steps.end());
    Action a = MakeAction(ActionKind::kPrewarm, "model/" + svc.model, Reason::kPrewarm);
    a.unit = sw.unit;
    PrewarmStep& p = a.As<PrewarmStep>();
    p.snapshot = snapshot;
    p.bytes = need;
    p.file = file;
    a.detail = "read the " + FormatBytes(need) + " of " + what + " " + sw.address +
               " starts on into the page cache before its switch goes dark at step " +
               std::to_string(first + 2) +
               ", so that its start reads them from memory (memory available " +
               FormatBytes(mem.available_bytes) + ", margin " + FormatBytes(margin) +
               (resident ? ", " + FormatBytes(resident) + " already cached" : std::string()) + ")";
    InsertActions(plan, first, {a});
    for (auto& [path, at] : read_by)
      if (at >= first) ++at;
    read_by[snapshot + "/" + file] = first;
  }
}

}  // namespace berth
