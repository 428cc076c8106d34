#include "planners/standby.h"

#include <algorithm>

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

}  // namespace berth
