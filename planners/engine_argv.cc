#include "planners/engine_argv.h"

#include <cstdio>

#include "engine/core/units.h"

namespace berth {
namespace {

const char* DefaultExecutable(EngineKind e) {
  switch (e) {
    case EngineKind::kVllm:
      return "vllm";
    case EngineKind::kSglang:
      return "python3";
    case EngineKind::kLlamaServer:
      return "llama-server";
    case EngineKind::kCommand:
      return "";
  }
  return "";
}

}  // namespace

std::string ResolveExecutable(const ServiceSpec& s,
                              const std::map<std::string, std::string>& host) {
  if (!s.executable.empty()) return s.executable;
  auto it = host.find(EngineName(s.engine));
  if (it != host.end()) return it->second;
  return DefaultExecutable(s.engine);
}

std::vector<std::string> ServiceArgv(const ServiceSpec& s, const RenderContext& ctx) {
  std::vector<std::string> a;
  std::string port = s.port ? std::to_string(*s.port) : "";
  switch (s.engine) {
    case EngineKind::kVllm:
      a = {ctx.executable,
           "serve",
           ctx.snapshot_path,
           "--served-model-name",
           s.ServedName(),
           "--host",
           s.bind,
           "--port",
           port,
           "--tensor-parallel-size",
           std::to_string(s.vllm.tensor_parallel_size),
           "--pipeline-parallel-size",
           std::to_string(s.vllm.pipeline_parallel_size)};
      if (s.vllm.enable_expert_parallel) a.push_back("--enable-expert-parallel");
      a.insert(a.end(), {"--gpu-memory-utilization", FormatDouble(s.vllm.gpu_memory_utilization)});
      if (s.vllm.max_model_len)
        a.insert(a.end(), {"--max-model-len", std::to_string(*s.vllm.max_model_len)});
      break;
    case EngineKind::kSglang:
      a = {ctx.executable};
      if (ctx.executable == "python3" || ctx.executable.ends_with("/python3"))
        a.insert(a.end(), {"-m", "sglang.launch_server"});
      a.insert(a.end(),
               {"--model-path", ctx.snapshot_path, "--served-model-name", s.ServedName(), "--host",
                s.bind, "--port", port, "--tp-size", std::to_string(s.sglang.tp_size),
                "--mem-fraction-static", FormatDouble(s.sglang.mem_fraction_static)});
      if (s.sglang.context_length)
        a.insert(a.end(), {"--context-length", std::to_string(*s.sglang.context_length)});
      break;
    case EngineKind::kLlamaServer: {
      std::string model = ctx.snapshot_path;
      if (!s.llama.model_file.empty()) model += "/" + s.llama.model_file;
      a = {ctx.executable,
           "--model",
           model,
           "--alias",
           s.ServedName(),
           "--host",
           s.bind,
           "--port",
           port,
           "--n-gpu-layers",
           std::to_string(s.llama.n_gpu_layers)};
      if (s.llama.ctx_size) a.insert(a.end(), {"--ctx-size", std::to_string(*s.llama.ctx_size)});
      break;
    }
    case EngineKind::kCommand:
      a = s.command;
      break;
  }
  a.insert(a.end(), s.args.begin(), s.args.end());
  return a;
}

}  // namespace berth
