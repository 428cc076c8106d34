// What the manifest loader and the planner need of vLLM's own rules beyond the adapter: which
// speculative methods take a draft model, and which environment variables vLLM no longer reads.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace berth {

/// Whether a speculative method of vLLM takes `vllm.speculative.model`
/// (vllm/config/speculative.py, SpeculativeConfig.__post_init__).
enum class DraftModelRule {
  kRequired,  // draft_model, eagle, eagle3, medusa, mlp_speculator, dflash: the draft's weights
  kRefused,   // mtp (the target's own MTP layers), ngram, ngram_gpu, suffix,
              // extract_hidden_states: no weights
  kOptional,  // dspark: in the target's checkpoint (DeepSeek) or a checkpoint of its own
};
DraftModelRule VllmDraftModelRule(std::string_view method);

/// Why `name` in `env:` does nothing on the vLLM berth was checked against (the sentence after
/// "'VLLM_USE_V1' "), or nullopt when vLLM reads it or it is not vLLM's.
std::optional<std::string> VllmObsoleteEnv(std::string_view name);

/// Where berth keeps each vLLM service's own caches (VLLM_CACHE_ROOT, vllm/envs.py: its
/// torch.compile artefacts under torch_compile_cache/, default ~/.cache/vllm), one folder per
/// service so that two servers never share one: <this>/<service name>. A restart finds what the
/// last start compiled; no plan removes it.
inline constexpr std::string_view kVllmCacheParent = "/var/cache/berth/vllm";

}  // namespace berth
