// SGLang: `python -m sglang.launch_server` or the `sglang serve` console command
// (python/sglang/cli/main.py), flags from python/sglang/srt/server_args.py (sgl-project/sglang
// at 001067fffe33427bee0ed2f007fb7551a1d76b44).
#include <regex>

#include "core/units.h"
#include "planners/servers/adapters.h"

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

std::string Devices(size_t n) {
  return Int(static_cast<int64_t>(n)) + (n == 1 ? " device" : " devices");
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
              s.bind, "--port", s.port ? Int(*s.port) : "", "--tp-size", Int(o.tp_size)});
    if (o.dp_size != 1) a.insert(a.end(), {"--dp-size", Int(o.dp_size)});
    if (o.enable_dp_attention) a.push_back("--enable-dp-attention");
    if (o.ep_size != 1) a.insert(a.end(), {"--ep-size", Int(o.ep_size)});
    a.insert(a.end(), {"--mem-fraction-static", FormatDouble(o.mem_fraction_static)});
    if (o.context_length) a.insert(a.end(), {"--context-length", Int(*o.context_length)});
    if (o.trust_remote_code) a.push_back("--trust-remote-code");
    if (!o.tool_call_parser.empty()) a.insert(a.end(), {"--tool-call-parser", o.tool_call_parser});
    if (!o.reasoning_parser.empty()) a.insert(a.end(), {"--reasoning-parser", o.reasoning_parser});
    if (!o.kv_cache_dtype.empty()) a.insert(a.end(), {"--kv-cache-dtype", o.kv_cache_dtype});
    const SglangSpeculative& sp = o.speculative;
    if (!sp.algorithm.empty()) {
      a.insert(a.end(), {"--speculative-algorithm", sp.algorithm});
      if (!s.draft_model.empty())
        a.insert(a.end(), {"--speculative-draft-model-path", ctx.draft_snapshot_path});
      if (sp.num_steps) a.insert(a.end(), {"--speculative-num-steps", Int(*sp.num_steps)});
      if (sp.eagle_topk) a.insert(a.end(), {"--speculative-eagle-topk", Int(*sp.eagle_topk)});
      if (sp.num_draft_tokens)
        a.insert(a.end(), {"--speculative-num-draft-tokens", Int(*sp.num_draft_tokens)});
    }
    return a;
  }

  std::vector<OwnedFlag> OwnedFlags(const ServiceSpec& s) const override {
    const SglangOptions& o = s.sglang;
    std::vector<OwnedFlag> f = {
        {{"--model-path", "--model"}, "model"},
        {{"--served-model-name"}, "sglang.served_model_name"},
        {{"--host"}, "bind"},
        {{"--port"}, "port"},
        // --tp and --dp: argparse's abbreviations of --tp-size and --dp-size, which SGLang's
        // own tests and docs use.
        {{"--tp-size", "--tensor-parallel-size", "--tp"}, "sglang.tp_size"},
        {{"--mem-fraction-static"}, "sglang.mem_fraction_static"},
    };
    // The GPU-count rule counts dp and ep: `args` may not change them behind it.
    f.push_back({{"--dp-size", "--data-parallel-size", "--dp"}, "sglang.dp_size"});
    f.push_back({{"--ep-size", "--expert-parallel-size", "--ep"}, "sglang.ep_size"});
    f.push_back({{"--enable-dp-attention"}, "sglang.enable_dp_attention"});
    auto when = [&](bool set, std::vector<std::string> spellings, std::string key) {
      if (set) f.push_back({std::move(spellings), "sglang." + key});
    };
    when(o.context_length.has_value(), {"--context-length"}, "context_length");
    when(o.trust_remote_code, {"--trust-remote-code"}, "trust_remote_code");
    when(!o.tool_call_parser.empty(), {"--tool-call-parser"}, "tool_call_parser");
    when(!o.reasoning_parser.empty(), {"--reasoning-parser"}, "reasoning_parser");
    when(!o.kv_cache_dtype.empty(), {"--kv-cache-dtype"}, "kv_cache_dtype");
    when(!o.speculative.algorithm.empty(),
         {"--speculative-algorithm", "--speculative-draft-model-path", "--speculative-draft-model",
          "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"},
         "speculative");
    return f;
  }

  /// SGLang's own rule (server_args.py, _handle_data_parallelism and the launcher's GPU
  /// assignment): without DP attention each of dp_size replicas takes tp_size GPUs, so
  /// tp × dp GPUs; with it the dp_size attention groups live within tp (tp_size GPUs, and
  /// `assert self.tp_size % self.dp_size == 0`). Expert parallelism splits the MoE layers
  /// within tp: ep_size divides tp_size.
  std::optional<EngineRefusal> GpuCountProblem(const ServiceSpec& s, size_t n) const override {
    const SglangOptions& o = s.sglang;
    if (o.ep_size > o.tp_size || o.tp_size % o.ep_size != 0)
      return EngineRefusal{
          "ep_size " + Int(o.ep_size) + " does not divide tp_size " + Int(o.tp_size) +
              ": SGLang splits the experts within tp",
          "make ep_size a divisor of tp_size (e.g. ep_size: " + Int(o.tp_size) + ")"};
    if (o.enable_dp_attention) {
      if (o.dp_size < 2)
        return EngineRefusal{
            "enable_dp_attention needs dp_size above 1 (SGLang turns DP "
            "attention off at dp_size 1)",
            "set dp_size to a divisor of tp_size, or remove enable_dp_attention"};
      if (o.tp_size % o.dp_size != 0)
        return EngineRefusal{"dp_size " + Int(o.dp_size) + " does not divide tp_size " +
                                 Int(o.tp_size) +
                                 ": with enable_dp_attention the attention groups live within tp",
                             "make dp_size a divisor of tp_size"};
      if (o.tp_size == static_cast<int>(n)) return std::nullopt;
      return EngineRefusal{"tp_size " + Int(o.tp_size) +
                               " (DP attention within it), but gpus "
                               "lists " +
                               Devices(n),
                           "make tp_size equal the number of GPUs"};
    }
    const int64_t product = int64_t{o.tp_size} * o.dp_size;
    if (product == static_cast<int64_t>(n)) return std::nullopt;
    if (o.dp_size == 1)
      return EngineRefusal{"tp_size " + Int(o.tp_size) + ", but gpus lists " + Devices(n),
                           "make tp_size equal the number of GPUs"};
    return EngineRefusal{"tp_size " + Int(o.tp_size) + " × dp_size " + Int(o.dp_size) + " = " +
                             Int(product) + ", but gpus lists " + Devices(n),
                         "make tp_size × dp_size equal the number of GPUs"};
  }

  /// Each replica holds the whole model split tp ways; DP attention groups share one copy.
  std::optional<WeightSplit> Split(const ServiceSpec& s) const override {
    const SglangOptions& o = s.sglang;
    if (o.dp_size == 1 || o.enable_dp_attention)
      return WeightSplit{o.tp_size, 1, "tp_size " + Int(o.tp_size)};
    return WeightSplit{o.tp_size, o.dp_size,
                       "tp_size " + Int(o.tp_size) + ", " + Int(o.dp_size) + " replicas (dp_size)"};
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
