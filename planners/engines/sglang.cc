// SGLang: `python -m sglang.launch_server` or the `sglang serve` console command
// (python/sglang/cli/main.py), flags from python/sglang/srt/server_args.py.
#include <regex>

#include "engine/core/units.h"
#include "planners/engines/adapters.h"

namespace berth::engines {
namespace {

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// python, python3, python3.12: an interpreter that needs the module named.
bool IsPython(const std::string& exe) {
  static const std::regex kPython(R"(python(3(\.[0-9]+)?)?)");
  return std::regex_match(Basename(exe), kPython);
}

class SglangAdapter final : public EngineAdapter {
 public:
  EngineKind kind() const override { return EngineKind::kSglang; }
  std::string DefaultExecutable() const override { return "python3"; }

  std::vector<std::string> Argv(const ServiceSpec& s, const RenderContext& ctx) const override {
    const SglangOptions& o = s.sglang;
    std::vector<std::string> a = {ctx.executable};
    if (IsPython(ctx.executable))
      a.insert(a.end(), {"-m", "sglang.launch_server"});
    else if (Basename(ctx.executable) == "sglang")
      a.push_back("serve");
    a.insert(a.end(),
             {"--model-path", ctx.snapshot_path, "--served-model-name", s.ServedName(), "--host",
              s.bind, "--port", s.port ? Int(*s.port) : "", "--tp-size", Int(o.tp_size),
              "--mem-fraction-static", FormatDouble(o.mem_fraction_static)});
    if (o.context_length) a.insert(a.end(), {"--context-length", Int(*o.context_length)});
    return a;
  }

  std::vector<OwnedFlag> OwnedFlags(const ServiceSpec& s) const override {
    std::vector<OwnedFlag> f = {
        {{"--model-path", "--model"}, "model"},
        {{"--served-model-name"}, "sglang.served_model_name"},
        {{"--host"}, "bind"},
        {{"--port"}, "port"},
        {{"--tp-size", "--tensor-parallel-size"}, "sglang.tp_size"},
        {{"--mem-fraction-static"}, "sglang.mem_fraction_static"},
    };
    if (s.sglang.context_length) f.push_back({{"--context-length"}, "sglang.context_length"});
    return f;
  }

  std::optional<EngineRefusal> GpuCountProblem(const ServiceSpec& s, size_t n) const override {
    if (s.sglang.tp_size == static_cast<int>(n)) return std::nullopt;
    return EngineRefusal{"tp_size " + Int(s.sglang.tp_size) + ", but gpus lists " +
                             Int(static_cast<int64_t>(n)) + (n == 1 ? " device" : " devices"),
                         "make tp_size equal the number of GPUs"};
  }

  std::optional<WeightSplit> Split(const ServiceSpec& s) const override {
    return WeightSplit{s.sglang.tp_size, 1, "tp_size " + Int(s.sglang.tp_size)};
  }

  std::optional<std::pair<double, std::string>> MemoryShare(const ServiceSpec& s) const override {
    return std::pair{s.sglang.mem_fraction_static, std::string("mem_fraction_static")};
  }
};

}  // namespace

const EngineAdapter& Sglang() {
  static const SglangAdapter a;
  return a;
}

}  // namespace berth::engines
