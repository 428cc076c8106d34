#include "planners/llama_claim.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "core/units.h"
#include "planners/draft.h"

namespace berth {
namespace {

// The ggml type of a KV cache type llama-server takes (common/arg.cpp kv_cache_types); "" is
// its default, f16.
std::optional<uint32_t> CacheType(const std::string& name) {
  static const std::map<std::string, uint32_t> types = {
      {"", 1},     {"f16", 1},  {"f32", 0},  {"bf16", 30}, {"q8_0", 8},
      {"q4_0", 2}, {"q4_1", 3}, {"q5_0", 6}, {"q5_1", 7},  {"iq4_nl", 20},
  };
  auto it = types.find(name);
  if (it == types.end()) return std::nullopt;
  return it->second;
}

uint64_t RoundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace

std::optional<LlamaClaim> DeriveLlamaClaim(const LlamaServerOptions& o, const GgufModel& m,
                                           size_t gpus, std::string* why_not) {
  if (!m.problem.empty()) {
    *why_not = "its model file " + m.problem;
    return std::nullopt;
  }
  const uint64_t layers = m.block_count;
  if (m.block_bytes.size() != layers) {  // (a saved observation edited by hand)
    *why_not = "its figures list " + std::to_string(m.block_bytes.size()) + " blocks of " +
               std::to_string(layers);
    return std::nullopt;
  }
  // -ngl counts the output layer as one more layer after the last block (llama_model::
  // load_tensors: i_gpu_start = n_layer + 1 - n_gpu_layers): -ngl 16 of 32 blocks offloads 15
  // blocks and the output. "all" is every one; "auto" fits what is free, at most all (the claim
  // when it fits).
  uint64_t offload = layers + 1;
  if (o.n_gpu_layers != "all" && o.n_gpu_layers != "auto") {
    uint64_t n = 0;
    const char* end = o.n_gpu_layers.data() + o.n_gpu_layers.size();
    if (std::from_chars(o.n_gpu_layers.data(), end, n).ptr != end) {
      *why_not = "n_gpu_layers '" + o.n_gpu_layers + "' is not a number of layers";
      return std::nullopt;
    }
    offload = std::min(n, layers + 1);
  }
  const uint64_t first_block = layers + 1 - offload;  // blocks before it stay on the CPU
  std::optional<uint32_t> k_type = CacheType(o.cache_type_k);
  std::optional<uint32_t> v_type = CacheType(o.cache_type_v);
  if (!k_type || !v_type) {
    *why_not = "berth does not know the KV cache type '" +
               (k_type ? o.cache_type_v : o.cache_type_k) + "'";
    return std::nullopt;
  }
  // The context: -c, else the model's training context (llama_context: n_ctx 0 = n_ctx_train),
  // padded to 256; with --parallel N (kv_unified off) each slot's share is padded to 256, with
  // it unset llama-server takes 4 slots over one unified cache (tools/server/server.cpp).
  uint64_t ctx = o.ctx_size.value_or(0) ? *o.ctx_size : m.context_length;
  if (ctx == 0) {
    *why_not = "its model file gives no " + m.architecture + ".context_length and " +
               "llama_server.ctx_size is not set";
    return std::nullopt;
  }
  ctx = RoundUp(ctx, 256);
  if (o.parallel && *o.parallel > 1) {
    const uint64_t slots = static_cast<uint64_t>(*o.parallel);
    ctx = RoundUp(std::max<uint64_t>(ctx / slots, 1), 256) * slots;
  }
  LlamaClaim c;
  c.model_bytes = m.TensorBytes();
  uint64_t weights = 0, kv = 0;
  for (uint64_t il = 0; il < layers; ++il) {
    std::optional<uint64_t> k = GgmlBytes(*k_type, m.HeadsKv(il) * m.KeyLength());
    std::optional<uint64_t> v = GgmlBytes(*v_type, m.HeadsKv(il) * m.ValueLength());
    if (!k || !v) {
      *why_not = "its KV rows (" + std::to_string(m.HeadsKv(il) * m.KeyLength()) +
                 " values) are not whole blocks of cache type " + o.cache_type_k + "/" +
                 o.cache_type_v;
      return std::nullopt;
    }
    const uint64_t layer_kv = ctx * (*k + *v);
    c.all_kv += layer_kv;
    if (il < first_block) continue;
    weights += m.block_bytes[il];
    kv += layer_kv;
  }
  const bool output = offload >= 1;
  if (output) weights += m.output_bytes;
  const uint64_t n = std::max<size_t>(gpus, 1);
  c.weights = weights / n;
  c.kv = kv / n;
  // --ubatch-size, at most --batch-size (llama_context: n_ubatch = min(n_batch, n_ubatch)).
  const uint64_t ubatch =
      std::min<uint64_t>(o.batch_size ? static_cast<uint64_t>(*o.batch_size) : kLlamaBatch,
                         o.ubatch_size ? static_cast<uint64_t>(*o.ubatch_size) : kLlamaUbatch);
  c.compute = ubatch * m.vocab_size * 4 + kLlamaGpuOverheadBytes;
  const uint64_t blocks_on_gpu = layers - std::min(first_block, layers);
  const std::string cache = (o.cache_type_k.empty() ? "f16" : o.cache_type_k) + "/" +
                            (o.cache_type_v.empty() ? "f16" : o.cache_type_v);
  const std::string each = n > 1 ? "; weights and KV cache split over " + std::to_string(n) +
                                       " GPUs (llama.cpp's layer split)"
                                 : "";
  c.words = FormatGiB(c.weights) + " of weights (" + std::to_string(blocks_on_gpu) + " of " +
            std::to_string(layers) + " layers" + (output ? " and the output layer" : "") + ")" +
            " + " + FormatGiB(c.kv) + " of KV cache (" + std::to_string(ctx) +
            " tokens of context" +
            (o.ctx_size.value_or(0) ? "" : ", the model's training context") + ", " + cache + ")" +
            " + " + FormatGiB(c.compute) + " of compute buffers and CUDA context" + each +
            (o.n_gpu_layers == "auto" ? "; n_gpu_layers auto counted as all" : "");
  return c;
}

void DeriveLlamaClaims(const Desired& d, Draft* draft) {
  for (const auto& [name, s] : d.services) {
    if (!s.has_engine || s.engine != EngineKind::kLlamaServer || s.gpu_memory || s.gpus.empty())
      continue;
    const ResolvedModel* m = FindResolved(draft->models, s.model);
    if (!m || !m->present || !m->present->complete || !m->present->gguf) continue;
    auto file = m->present->gguf->find(s.llama.model_file);
    if (file == m->present->gguf->end() || !file->second.problem.empty() || !file->second.model)
      continue;  // the preflight says what is wrong with the file; unread: nothing to derive
    std::string why_not;
    std::optional<LlamaClaim> c =
        DeriveLlamaClaim(s.llama, *file->second.model, s.gpus.size(), &why_not);
    if (c) {
      draft->llama_claims[s.UnitName()] = *c;
      continue;
    }
    draft->warnings.push_back("service/" + name + ": berth cannot derive what it claims of GPU " +
                              "memory: " + why_not + " (" + s.llama.model_file +
                              "); it claims nothing. Declare gpu_memory: on it (" +
                              s.loc.ToString() + ")");
  }
}

}  // namespace berth
