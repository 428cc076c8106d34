// llama.cpp's llama-server: flags from common/arg.cpp (the LLAMA_EXAMPLE_SERVER options) and
// tools/server/.
#include "planners/engines/adapters.h"

namespace berth::engines {
namespace {

class LlamaServerAdapter final : public EngineAdapter {
 public:
  EngineKind kind() const override { return EngineKind::kLlamaServer; }
  std::string DefaultExecutable() const override { return "llama-server"; }

  std::vector<std::string> Argv(const ServiceSpec& s, const RenderContext& ctx) const override {
    const LlamaServerOptions& o = s.llama;
    std::string model = ctx.snapshot_path;
    if (!o.model_file.empty()) model += "/" + o.model_file;
    std::vector<std::string> a = {ctx.executable,   "--model",          model,
                                  "--alias",        s.ServedName(),     "--host",
                                  s.bind,           "--port",           s.port ? Int(*s.port) : "",
                                  "--n-gpu-layers", Int(o.n_gpu_layers)};
    if (o.ctx_size) a.insert(a.end(), {"--ctx-size", Int(*o.ctx_size)});
    return a;
  }

  std::vector<OwnedFlag> OwnedFlags(const ServiceSpec& s) const override {
    std::vector<OwnedFlag> f = {
        {{"--model", "-m"}, "model"},
        {{"--alias", "-a"}, "llama_server.alias"},
        {{"--host"}, "bind"},
        {{"--port"}, "port"},
        {{"--n-gpu-layers", "--gpu-layers", "-ngl"}, "llama_server.n_gpu_layers"},
    };
    if (s.llama.ctx_size) f.push_back({{"--ctx-size", "-c"}, "llama_server.ctx_size"});
    return f;
  }
};

}  // namespace

const EngineAdapter& LlamaServer() {
  static const LlamaServerAdapter a;
  return a;
}

}  // namespace berth::engines
