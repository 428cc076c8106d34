// vLLM: `vllm serve MODEL` (vllm/entrypoints/cli/serve.py), flags from
// vllm/engine/arg_utils.py (EngineArgs.add_cli_args) and vllm/entrypoints/openai/cli_args.py.
#include "engine/core/units.h"
#include "planners/engines/adapters.h"

namespace berth::engines {
namespace {

class VllmAdapter final : public EngineAdapter {
 public:
  EngineKind kind() const override { return EngineKind::kVllm; }
  std::string DefaultExecutable() const override { return "vllm"; }

  std::vector<std::string> Argv(const ServiceSpec& s, const RenderContext& ctx) const override {
    const VllmOptions& o = s.vllm;
    std::vector<std::string> a = {ctx.executable,
                                  "serve",
                                  ctx.snapshot_path,
                                  "--served-model-name",
                                  s.ServedName(),
                                  "--host",
                                  s.bind,
                                  "--port",
                                  s.port ? Int(*s.port) : "",
                                  "--tensor-parallel-size",
                                  Int(o.tensor_parallel_size),
                                  "--pipeline-parallel-size",
                                  Int(o.pipeline_parallel_size)};
    if (o.enable_expert_parallel) a.push_back("--enable-expert-parallel");
    a.insert(a.end(), {"--gpu-memory-utilization", FormatDouble(o.gpu_memory_utilization)});
    if (o.max_model_len) a.insert(a.end(), {"--max-model-len", Int(*o.max_model_len)});
    return a;
  }

  std::vector<OwnedFlag> OwnedFlags(const ServiceSpec& s) const override {
    std::vector<OwnedFlag> f = {
        {{"--model"}, "model"},
        {{"--served-model-name"}, "vllm.served_model_name"},
        {{"--host"}, "bind"},
        {{"--port"}, "port"},
        {{"--tensor-parallel-size", "-tp"}, "vllm.tensor_parallel_size"},
        {{"--pipeline-parallel-size", "-pp"}, "vllm.pipeline_parallel_size"},
        {{"--enable-expert-parallel", "--no-enable-expert-parallel", "-ep"},
         "vllm.enable_expert_parallel"},
        {{"--gpu-memory-utilization"}, "vllm.gpu_memory_utilization"},
    };
    if (s.vllm.max_model_len) f.push_back({{"--max-model-len"}, "vllm.max_model_len"});
    return f;
  }

  std::optional<EngineRefusal> GpuCountProblem(const ServiceSpec& s, size_t n) const override {
    const int tp = s.vllm.tensor_parallel_size, pp = s.vllm.pipeline_parallel_size;
    const int64_t product = int64_t{tp} * pp;
    if (product == static_cast<int64_t>(n)) return std::nullopt;
    return EngineRefusal{
        "tensor_parallel_size " + Int(tp) + " × pipeline_parallel_size " + Int(pp) + " = " +
            Int(product) + ", but gpus lists " + Int(static_cast<int64_t>(n)) +
            (n == 1 ? " device" : " devices"),
        "make tensor_parallel_size × pipeline_parallel_size equal the number of GPUs"};
  }

  std::optional<WeightSplit> Split(const ServiceSpec& s) const override {
    const int tp = s.vllm.tensor_parallel_size, pp = s.vllm.pipeline_parallel_size;
    return WeightSplit{tp * pp, 1,
                       "tensor_parallel_size " + Int(tp) + " × pipeline_parallel_size " + Int(pp)};
  }

  std::optional<std::pair<double, std::string>> MemoryShare(const ServiceSpec& s) const override {
    return std::pair{s.vllm.gpu_memory_utilization, std::string("gpu_memory_utilization")};
  }
};

}  // namespace

const EngineAdapter& Vllm() {
  static const VllmAdapter a;
  return a;
}

}  // namespace berth::engines
