// TensorRT-LLM's trtllm-serve: `trtllm-serve serve MODEL` and its click options, underscore
// spelled (tensorrt_llm/commands/serve.py, NVIDIA/TensorRT-LLM at
// 00209af149e7774406881a37283dce303571eb11). It has no served-name flag: OpenAIServer lists a
// local model folder under the folder's name (tensorrt_llm/serve/openai_server.py:
// `self.model = model_dir.name`), which for a Hub snapshot is its commit. Readiness: the HTTP
// server listens only once the model is loaded, and /health answers 200 then.
#include "planners/servers/adapters.h"

namespace berth::engines {
namespace {

std::string Devices(size_t n) {
  return Int(static_cast<int64_t>(n)) + (n == 1 ? " device" : " devices");
}

class TrtllmAdapter final : public EngineAdapter {
 public:
  EngineKind kind() const override { return EngineKind::kTrtllm; }
  std::string DefaultExecutable() const override { return "trtllm-serve"; }

  std::vector<std::string> Argv(const ServiceSpec& s, const RenderContext& ctx) const override {
    const TrtllmOptions& o = s.trtllm;
    std::vector<std::string> a = {ctx.executable,
                                  "serve",
                                  ctx.snapshot_path,
                                  "--host",
                                  s.bind,
                                  "--port",
                                  s.port ? Int(*s.port) : "",
                                  "--tp_size",
                                  Int(o.tp_size),
                                  "--pp_size",
                                  Int(o.pp_size)};
    if (o.ep_size) a.insert(a.end(), {"--ep_size", Int(*o.ep_size)});
    if (!o.backend.empty()) a.insert(a.end(), {"--backend", o.backend});
    if (o.max_seq_len) a.insert(a.end(), {"--max_seq_len", Int(*o.max_seq_len)});
    if (o.trust_remote_code) a.push_back("--trust_remote_code");
    if (!o.extra_llm_api_options.empty())
      a.insert(a.end(), {"--extra_llm_api_options", o.extra_llm_api_options});
    return a;
  }

  std::vector<OwnedFlag> OwnedFlags(const ServiceSpec& s) const override {
    const TrtllmOptions& o = s.trtllm;
    std::vector<OwnedFlag> f = {
        {{"--host"}, "bind"},
        {{"--port"}, "port"},
        {{"--tp_size", "--tensor_parallel_size"}, "trtllm.tp_size"},
        {{"--pp_size", "--pipeline_parallel_size"}, "trtllm.pp_size"},
        // The GPU-count rule counts ep: `args` may not change it behind it.
        {{"--ep_size", "--moe_expert_parallel_size"}, "trtllm.ep_size"},
    };
    auto when = [&](bool set, std::vector<std::string> spellings, std::string key) {
      if (set) f.push_back({std::move(spellings), "trtllm." + key});
    };
    when(!o.backend.empty(), {"--backend"}, "backend");
    when(o.max_seq_len.has_value(), {"--max_seq_len"}, "max_seq_len");
    when(o.trust_remote_code, {"--trust_remote_code"}, "trust_remote_code");
    when(!o.extra_llm_api_options.empty(), {"--extra_llm_api_options", "--config"},
         "extra_llm_api_options");
    return f;
  }

  /// The snapshot folder's name (its commit): trtllm-serve cannot be told another.
  std::string ReportedName(const ServiceSpec&, const RenderContext& ctx) const override {
    const std::string& path = ctx.snapshot_path;
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
  }

  /// TensorRT-LLM's Mapping: world size = tp × pp; the MoE experts split within tp
  /// (moe_tp_size × moe_ep_size = tp_size), so ep_size divides tp_size.
  std::optional<EngineRefusal> GpuCountProblem(const ServiceSpec& s, size_t n) const override {
    const TrtllmOptions& o = s.trtllm;
    if (o.ep_size && (*o.ep_size > o.tp_size || o.tp_size % *o.ep_size != 0))
      return EngineRefusal{"ep_size " + Int(*o.ep_size) + " does not divide tp_size " +
                               Int(o.tp_size) + ": TensorRT-LLM splits the experts within tp",
                           "make ep_size a divisor of tp_size"};
    const int64_t product = int64_t{o.tp_size} * o.pp_size;
    if (product == static_cast<int64_t>(n)) return std::nullopt;
    return EngineRefusal{"tp_size " + Int(o.tp_size) + " × pp_size " + Int(o.pp_size) + " = " +
                             Int(product) + ", but gpus lists " + Devices(n),
                         "make tp_size × pp_size equal the number of GPUs"};
  }

  std::optional<WeightSplit> Split(const ServiceSpec& s) const override {
    const TrtllmOptions& o = s.trtllm;
    return WeightSplit{o.tp_size * o.pp_size, 1,
                       "tp_size " + Int(o.tp_size) + " × pp_size " + Int(o.pp_size)};
  }

  /// trtllm-serve loads the weights, then takes free_gpu_memory_fraction (0.9) of what is
  /// left for its KV cache: all of each GPU, unless `gpu_memory:` says otherwise.
  std::optional<std::pair<double, std::string>> MemoryShare(const ServiceSpec& s) const override {
    if (s.gpu_memory) return std::nullopt;
    return std::pair{1.0, std::string("trtllm-serve's share (weights, then 0.9 of the rest)")};
  }
};

}  // namespace

const EngineAdapter& Trtllm() {
  static const TrtllmAdapter a;
  return a;
}

}  // namespace berth::engines
