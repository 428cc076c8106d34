#include "planners/standby.h"

#include <algorithm>

#include "core/units.h"
#include "planners/prewarm.h"

namespace berth {

uint64_t StandbyResidual(uint64_t gpu_total) {
  return std::max<uint64_t>(gpu_total / 40, uint64_t{2} << 30);
}

std::optional<uint64_t> StandbyWeights(const ServiceSpec& s,
                                       const std::vector<ResolvedModel>& models) {
  uint64_t bytes = 0;
  for (const std::string& key : s.ModelKeys()) {
    const ResolvedModel* m = FindResolved(models, key);
    if (!m || !m->weights_bytes) return std::nullopt;
    bytes += *m->weights_bytes;
  }
  if (bytes == 0) return std::nullopt;
  return bytes;
}

bool SleepsOnStandby(const ServiceSpec& s) {
  return s.standby == Standby::kSleep && s.has_engine && s.engine == EngineKind::kVllm &&
         s.port.has_value();
}

bool SleepInsteadOfStop(const Transition& t, const ServiceSpec* for_spec, const ObservedMemory& mem,
                        const std::vector<ResolvedModel>& models, uint64_t asleep_bytes,
                        uint64_t* weights, std::string* why) {
  why->clear();
  if (!t.spec || !SleepsOnStandby(*t.spec)) return false;
  if (t.kind != ActionKind::kStop || t.spec->state != ServiceState::kStopped) return false;
  if (for_spec && for_spec->port && *for_spec->port == *t.spec->port) {
    *why = for_spec->name + " starts on port " + std::to_string(*t.spec->port) +
           ", which a sleeping server keeps: put the port behind a front (fronts:) for a " +
           "standby beside its replacement";
    return false;
  }
  if (!mem.known) {
    *why = "host memory was not observed (" +
           (mem.error.empty() ? std::string("a saved observation without it") : mem.error) +
           "): berth cannot tell whether it holds the weights";
    return false;
  }
  std::optional<uint64_t> w = StandbyWeights(*t.spec, models);
  if (!w) {
    *why = "berth does not know the size of its weights (neither the store nor the Hub " +
           std::string("listed their safetensors)");
    return false;
  }
  const uint64_t margin = PrewarmMargin(mem.total_bytes);
  const uint64_t room =
      mem.available_bytes > margin + asleep_bytes ? mem.available_bytes - margin - asleep_bytes : 0;
  if (*w > room) {
    *why = "its " + FormatBytes(*w) + " of weights do not fit in the " +
           FormatBytes(mem.available_bytes) + " of host memory available" +
           (asleep_bytes ? " (" + FormatBytes(asleep_bytes) + " of it taken by earlier sleeps)"
                         : std::string()) +
           ", less a margin of " + FormatBytes(margin);
    return false;
  }
  *weights = *w;
  return true;
}

}  // namespace berth
