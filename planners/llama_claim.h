// What a llama-server service claims of each GPU when the manifest gives no gpu_memory: derived
// from its GGUF file's metadata and tensor list (GgufModel, read by the store scan) the way
// llama.cpp (commit 80fb11a) lays the model out: the weights of the layers it offloads, the KV
// cache of its context on those layers, and its compute buffers and CUDA context. Internal to
// planners/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/desired.h"
#include "core/gguf_header.h"

namespace berth {

struct Draft;

/// What llama.cpp allocates on each GPU of a llama-server service, and why.
struct LlamaClaim {
  uint64_t weights = 0;  // the offloaded layers' tensors, per GPU
  uint64_t kv = 0;       // the KV cache of those layers, per GPU
  uint64_t compute = 0;  // compute buffers (logits) and the CUDA context, per GPU
  /// All of the model's tensors and the KV cache of every layer: what llama.cpp allocates in
  /// all (on the CPU and the GPUs), for comparison with llama-fit-params.
  uint64_t model_bytes = 0;
  uint64_t all_kv = 0;
  /// "13.2 GiB of weights (32 of 32 layers and the output layer) + 0.5 GiB of KV cache
  /// (4096 tokens of context, f16/f16) + 0.7 GiB of compute buffers and CUDA context".
  std::string words;
  uint64_t total() const { return weights + kv + compute; }
};

/// The CUDA context, cuBLAS workspace and compute buffers beyond the logits that a llama-server
/// process holds on its GPU: 768 MiB. Fitted to an 8B llama (F16, 32 layers, 8 KV heads, vocab
/// 32,000) on an H100 with llama.cpp 80fb11a: 635 to 743 MiB after weights, KV cache and logits
/// once loaded, at six -c/-np/-ngl settings (docs/engines.md, "GPU memory"), and 118 MiB more
/// after a load of 16 streams (15,284 -> 15,402 MiB at -c 8192 -np 16; tests/gpu/README.md): a
/// claim is what the server holds while it serves, not only once it has loaded.
inline constexpr uint64_t kLlamaGpuOverheadBytes = uint64_t{768} << 20;
/// llama.cpp's default logical and physical batches (common/common.h n_batch, n_ubatch): the
/// logits buffer holds n_ubatch × n_vocab floats, n_ubatch at most n_batch (llama_context).
inline constexpr uint64_t kLlamaBatch = 2048;
inline constexpr uint64_t kLlamaUbatch = 512;

/// The claim of `options` on `gpus` GPUs (layers split evenly, as llama.cpp's layer split does
/// on GPUs of one size) for the model `m`; nullopt, with why in `why_not`, when its figures do
/// not tell (an unknown tensor type, no context length, a cache type berth does not know).
std::optional<LlamaClaim> DeriveLlamaClaim(const LlamaServerOptions& options, const GgufModel& m,
                                           size_t gpus, std::string* why_not);

/// The claims of the manifest's llama-server services that declare no gpu_memory and whose
/// model file the store scan read (unit -> claim per GPU), into draft->llama_claims; a warning
/// for each whose file's figures berth cannot use. Needs draft->models (DiffModels).
void DeriveLlamaClaims(const Desired& desired, Draft* draft);

}  // namespace berth
