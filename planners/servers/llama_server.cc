// llama.cpp's llama-server: flags from common/arg.cpp (the LLAMA_EXAMPLE_SERVER options) and
// tools/server/ (ggml-org/llama.cpp, master of 2026). Readiness: /health answers 503 while the
// model loads, 200 once it serves; /v1/models lists the --alias as the model's id.
#include "planners/servers/adapters.h"

namespace berth::engines {
namespace {

class LlamaServerAdapter final : public EngineAdapter {
 public:
  EngineKind kind() const override { return EngineKind::kLlamaServer; }
  std::string DefaultExecutable() const override { return "llama-server"; }

  std::vector<std::string> Argv(const ServiceSpec& s, const RenderContext& ctx) const override {
    const LlamaServerOptions& o = s.llama;
    // --model takes a GGUF file: model_file is required at load.
    std::string model = ctx.snapshot_path + "/" + o.model_file;
    std::vector<std::string> a = {ctx.executable,   "--model",      model,
                                  "--alias",        s.ServedName(), "--host",
                                  s.bind,           "--port",       s.port ? Int(*s.port) : "",
                                  "--n-gpu-layers", o.n_gpu_layers};
    if (o.ctx_size) a.insert(a.end(), {"--ctx-size", Int(*o.ctx_size)});
    if (o.parallel) a.insert(a.end(), {"--parallel", Int(*o.parallel)});
    if (o.threads) a.insert(a.end(), {"--threads", Int(*o.threads)});
    if (o.batch_size) a.insert(a.end(), {"--batch-size", Int(*o.batch_size)});
    if (o.ubatch_size) a.insert(a.end(), {"--ubatch-size", Int(*o.ubatch_size)});
    if (o.jinja) a.push_back("--jinja");
    if (!o.cache_type_k.empty()) a.insert(a.end(), {"--cache-type-k", o.cache_type_k});
    if (!o.cache_type_v.empty()) a.insert(a.end(), {"--cache-type-v", o.cache_type_v});
    if (!o.split_mode.empty()) a.insert(a.end(), {"--split-mode", o.split_mode});
    return a;
  }

  std::vector<OwnedFlag> OwnedFlags(const ServiceSpec& s) const override {
    const LlamaServerOptions& o = s.llama;
    std::vector<OwnedFlag> f = {
        {{"--model", "-m"}, "model"},
        {{"--alias", "-a"}, "llama_server.alias"},
        {{"--host"}, "bind"},
        {{"--port"}, "port"},
        {{"--n-gpu-layers", "--gpu-layers", "-ngl"}, "llama_server.n_gpu_layers"},
    };
    auto when = [&](bool set, std::vector<std::string> spellings, std::string key) {
      if (set) f.push_back({std::move(spellings), "llama_server." + key});
    };
    when(o.ctx_size.has_value(), {"--ctx-size", "-c"}, "ctx_size");
    when(o.parallel.has_value(), {"--parallel", "-np"}, "parallel");
    when(o.threads.has_value(), {"--threads", "-t"}, "threads");
    when(o.batch_size.has_value(), {"--batch-size", "-b"}, "batch_size");
    when(o.ubatch_size.has_value(), {"--ubatch-size", "-ub"}, "ubatch_size");
    when(o.jinja, {"--jinja", "--no-jinja"}, "jinja");
    when(!o.cache_type_k.empty(), {"--cache-type-k", "-ctk"}, "cache_type_k");
    when(!o.cache_type_v.empty(), {"--cache-type-v", "-ctv"}, "cache_type_v");
    when(!o.split_mode.empty(), {"--split-mode", "-sm"}, "split_mode");
    return f;
  }
};

}  // namespace

const EngineAdapter& LlamaServer() {
  static const LlamaServerAdapter a;
  return a;
}

}  // namespace berth::engines
