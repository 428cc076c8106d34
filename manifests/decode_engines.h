// The engine sections of a service: `vllm:`, `sglang:`, `llama_server:`. Each decoder reports
// every problem through `r`; those returning bool say whether the parallel sizes were read
// (the GPU-count rule stays quiet otherwise).
#pragma once

#include <optional>

#include "engine/core/desired.h"
#include "manifests/yaml_reader.h"

namespace berth::manifests {

/// A fraction in (0, 1]: gpu_memory_utilization, mem_fraction_static.
std::optional<double> Fraction(YamlReader& r, const Field& f);
std::optional<int> PositiveInt(YamlReader& r, const Field& f);

bool DecodeVllm(YamlReader& r, const Field& block, VllmOptions* o);
bool DecodeSglang(YamlReader& r, const Field& block, SglangOptions* o);
void DecodeLlama(YamlReader& r, const Field& block, LlamaServerOptions* o);

}  // namespace berth::manifests
