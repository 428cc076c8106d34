// vLLM: `vllm serve MODEL` (vllm/entrypoints/cli/serve.py), flags from
// vllm/engine/arg_utils.py (EngineArgs.add_cli_args) and vllm/entrypoints/openai/cli_args.py.
// The names berth checks (parsers, speculative methods, the model types with an MTP draft,
// KV-cache dtypes) are the flag catalogue's (planners/servers/catalogue/vllm.json, vLLM at
// 99d7eb5d); the rules below were read in vllm-project/vllm's cli_args.py at 00522333 and
// config/speculative.py at f19b16d9 (the catalogue's source) and 002e77c1 (newer, the same).
#include "planners/servers/vllm.h"

#include <nlohmann/json.hpp>

#include "core/json_text.h"
#include "core/units.h"
#include "planners/servers/adapters.h"
#include "planners/servers/catalogue.h"

namespace berth {

DraftModelRule VllmDraftModelRule(std::string_view method) {
  // speculative.py, SpeculativeConfig.__post_init__: with no model, mtp takes the target's
  // checkpoint (dspark too, after the catalogue's release), ngram, ngram_gpu, suffix (and
  // extract_hidden_states, later) need none; every other method loads
  // `model` as a ModelConfig of its own ("num_speculative_tokens was provided but without
  // speculative model" otherwise).
  if (method == "mtp" || method == "ngram" || method == "ngram_gpu" || method == "suffix" ||
      method == "extract_hidden_states")
    return DraftModelRule::kRefused;
  if (method == "dspark") return DraftModelRule::kOptional;
  return DraftModelRule::kRequired;
}

std::optional<std::string> VllmObsoleteEnv(std::string_view name) {
  // vllm/envs.py: VLLM_USE_V1 went with the V0 engine (v0.11.0); V1 is the only engine, and
  // envs.py warns of a VLLM_ variable it does not know.
  if (name == "VLLM_USE_V1")
    return std::string(
        "selected vLLM's V0 or V1 engine; V1 is the only engine since vLLM 0.11, which no "
        "longer reads it (and warns of an unknown variable)");
  return std::nullopt;
}

namespace engines {
namespace {

// --speculative-config's JSON: the fields SpeculativeConfig reads, compact, method first.
std::string SpeculativeJson(const VllmSpeculative& sp, const RenderContext& ctx) {
  nlohmann::ordered_json j;
  j["method"] = sp.method;
  if (!sp.model.empty()) j["model"] = ctx.draft_snapshot_path;
  j["num_speculative_tokens"] = sp.num_speculative_tokens;
  if (sp.draft_tensor_parallel_size)
    j["draft_tensor_parallel_size"] = *sp.draft_tensor_parallel_size;
  if (sp.prompt_lookup_min) j["prompt_lookup_min"] = *sp.prompt_lookup_min;
  if (sp.prompt_lookup_max) j["prompt_lookup_max"] = *sp.prompt_lookup_max;
  // DumpJson, not dump(): the store path comes from the manifest and need not be UTF-8.
  return DumpJson(j);
}

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
    if (o.data_parallel_size != 1)
      a.insert(a.end(), {"--data-parallel-size", Int(o.data_parallel_size)});
    if (o.enable_expert_parallel) a.push_back("--enable-expert-parallel");
    a.insert(a.end(), {"--gpu-memory-utilization", FormatDouble(o.gpu_memory_utilization)});
    if (o.max_model_len) a.insert(a.end(), {"--max-model-len", Int(*o.max_model_len)});
    if (o.max_num_seqs) a.insert(a.end(), {"--max-num-seqs", Int(*o.max_num_seqs)});
    if (o.trust_remote_code) a.push_back("--trust-remote-code");
    if (!o.kv_cache_dtype.empty()) a.insert(a.end(), {"--kv-cache-dtype", o.kv_cache_dtype});
    // cli_args.py, validate_parsed_serve_args: --enable-auto-tool-choice needs a parser, and
    // without --enable-auto-tool-choice a request with tool_choice "auto" is refused.
    if (!o.tool_call_parser.empty())
      a.insert(a.end(), {"--enable-auto-tool-choice", "--tool-call-parser", o.tool_call_parser});
    if (!o.reasoning_parser.empty()) a.insert(a.end(), {"--reasoning-parser", o.reasoning_parser});
    if (o.speculative)
      a.insert(a.end(), {"--speculative-config", SpeculativeJson(*o.speculative, ctx)});
    // standby: sleep. vLLM's sleep mode (EngineArgs.enable_sleep_mode, vllm/engine/arg_utils.py;
    // the catalogue's --enable-sleep-mode); its /sleep, /wake_up and /is_sleeping routes are
    // attached only in dev mode (VLLM_SERVER_DEV_MODE=1, rendered with the environment:
    // vllm/entrypoints/serve/dev/sleep/api_router.py at e7a47b82).
    if (s.standby == Standby::kSleep) a.push_back("--enable-sleep-mode");
    return a;
  }

  std::vector<OwnedFlag> OwnedFlags(const ServiceSpec& s) const override {
    // The keys berth checks (the GPU count, the catalogue's tables, the draft model's
    // download) own their flags whether set or not: args cannot go around the check. Every
    // other spelling vLLM reads (underscores, prefixes) is found through the catalogue
    // (FindOwnedFlag).
    std::vector<OwnedFlag> f = {
        {{"--model"}, "model"},
        {{"--served-model-name"}, "vllm.served_model_name"},
        {{"--host"}, "bind"},
        {{"--port"}, "port"},
        {{"--tensor-parallel-size", "-tp"}, "vllm.tensor_parallel_size"},
        {{"--pipeline-parallel-size", "-pp"}, "vllm.pipeline_parallel_size"},
        {{"--data-parallel-size", "-dp"}, "vllm.data_parallel_size"},
        {{"--enable-expert-parallel", "--no-enable-expert-parallel", "-ep"},
         "vllm.enable_expert_parallel"},
        {{"--gpu-memory-utilization"}, "vllm.gpu_memory_utilization"},
        {{"--trust-remote-code", "--no-trust-remote-code"}, "vllm.trust_remote_code"},
        {{"--enable-auto-tool-choice", "--no-enable-auto-tool-choice", "--tool-call-parser"},
         "vllm.tool_call_parser"},
        {{"--reasoning-parser"}, "vllm.reasoning_parser"},
        {{"--kv-cache-dtype"}, "vllm.kv_cache_dtype"},
        {{"--speculative-config"}, "vllm.speculative"},
    };
    if (s.vllm.max_model_len) f.push_back({{"--max-model-len"}, "vllm.max_model_len"});
    if (s.vllm.max_num_seqs) f.push_back({{"--max-num-seqs"}, "vllm.max_num_seqs"});
    if (s.standby == Standby::kSleep)
      f.push_back({{"--enable-sleep-mode", "--no-enable-sleep-mode"}, "standby"});
    return f;
  }

  std::optional<EngineRefusal> GpuCountProblem(const ServiceSpec& s, size_t n) const override {
    const int tp = s.vllm.tensor_parallel_size, pp = s.vllm.pipeline_parallel_size,
              dp = s.vllm.data_parallel_size;
    const int64_t product = int64_t{tp} * pp * dp;
    if (product == static_cast<int64_t>(n)) return std::nullopt;
    return EngineRefusal{
        "tensor_parallel_size " + Int(tp) + " × pipeline_parallel_size " + Int(pp) +
            " × data_parallel_size " + Int(dp) + " = " + Int(product) + ", but gpus lists " +
            Int(static_cast<int64_t>(n)) + (n == 1 ? " device" : " devices"),
        "make tensor_parallel_size × pipeline_parallel_size × data_parallel_size equal the "
        "number of GPUs"};
  }

  std::optional<WeightSplit> Split(const ServiceSpec& s) const override {
    const int tp = s.vllm.tensor_parallel_size, pp = s.vllm.pipeline_parallel_size,
              dp = s.vllm.data_parallel_size;
    std::string words = "tensor_parallel_size " + Int(tp) + " × pipeline_parallel_size " + Int(pp);
    if (dp == 1) return WeightSplit{tp * pp, 1, words};
    if (!s.vllm.enable_expert_parallel)
      return WeightSplit{tp * pp, dp,
                         words + " in each of data_parallel_size " + Int(dp) +
                             " replicas (each holds a whole copy)"};
    // With expert parallelism vLLM shards the experts over every GPU of every replica (expert
    // parallel size tp × dp) and copies the rest into each: berth cannot tell the experts'
    // share, so it counts every weight as an expert, the least a GPU can hold, and refuses only
    // what cannot fit.
    return WeightSplit{tp * pp * dp, dp,
                       words + " × data_parallel_size " + Int(dp) +
                           " (enable_expert_parallel spreads the experts over all " +
                           Int(int64_t{tp} * pp * dp) +
                           " GPUs; every weight counted as an expert)"};
  }

  std::optional<std::pair<double, std::string>> MemoryShare(const ServiceSpec& s) const override {
    return std::pair{s.vllm.gpu_memory_utilization, std::string("gpu_memory_utilization")};
  }

  std::optional<EngineRefusal> ModelConfigProblem(const ServiceSpec& s,
                                                  const ModelConfig& config) const override {
    const auto& sp = s.vllm.speculative;
    if (!sp || sp->method != "mtp" || config.model_type.empty()) return std::nullopt;
    // The catalogue's mtp_model_types (config.json model_type values) and mtp_architectures
    // (the architectures hf_config_override maps by name).
    const EngineCatalogue& c = Catalogue(CatalogueEngine::kVllm);
    if (c.InTable("mtp_model_types", config.model_type)) return std::nullopt;
    for (const std::string& a : config.architectures)
      if (c.InTable("mtp_architectures", a)) return std::nullopt;
    // speculative.py: hf_config_override maps the model types with MTP layers to an MTP model
    // type; for any other, __post_init__ raises NotImplementedError.
    return EngineRefusal{
        "vllm.speculative.method mtp needs a model whose config.json model_type vLLM maps to an "
        "MTP draft (vllm/config/speculative.py, SpeculativeConfig.hf_config_override), and '" +
            config.model_type +
            "' is not one: vLLM would exit at start with \"Unsupported speculative method: "
            "'mtp'\"",
        "remove vllm.speculative, or choose a method this model has (an eagle3 draft model, "
        "ngram)"};
  }
};

}  // namespace

const EngineAdapter& Vllm() {
  static const VllmAdapter a;
  return a;
}

}  // namespace engines
}  // namespace berth
