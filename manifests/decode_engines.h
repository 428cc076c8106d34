// The engine sections of a service: `vllm:`, `sglang:`, `llama_server:`, `trtllm:`. Each decoder
// reports every problem through `r`; those returning bool say whether the parallel sizes were read
// (the GPU-count rule stays quiet otherwise).
#pragma once

#include <optional>

#include "core/desired.h"
#include "manifests/yaml_reader.h"

namespace berth::manifests {

/// A fraction in (0, 1]: gpu_memory_utilization, mem_fraction_static.
std::optional<double> Fraction(YamlReader& r, const Field& f);
std::optional<int> PositiveInt(YamlReader& r, const Field& f);

/// `draft_model_loc`: where vllm.speculative.model is written (merge checks it names a model).
bool DecodeVllm(YamlReader& r, const Field& block, VllmOptions* o, SourceLoc* draft_model_loc);
/// `draft_model_loc`: where speculative.draft_model is written (line 0 when it is not).
bool DecodeSglang(YamlReader& r, const Field& block, SglangOptions* o, SourceLoc* draft_model_loc);
void DecodeLlama(YamlReader& r, const Field& block, LlamaServerOptions* o);
bool DecodeTrtllm(YamlReader& r, const Field& block, TrtllmOptions* o);

}  // namespace berth::manifests
