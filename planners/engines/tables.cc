// Until the flag catalogue (planners/engines/catalogue.h) lands: the vLLM tables berth checks,
// read from vllm-project/vllm at 002e77c1f0ef (vllm/config/speculative.py, config/cache.py,
// tool_parsers/, reasoning/).
#include "planners/engines/tables.h"

#include <algorithm>
#include <map>

namespace berth {
namespace {

const std::map<std::string_view, std::vector<std::string_view>>& VllmTables() {
  static const std::map<std::string_view, std::vector<std::string_view>> t = {
      {"tool_call_parsers",
       {"deepseek_v3",     "deepseek_v31",   "deepseek_v32",   "ernie45",     "glm45",
        "glm47",           "granite-20b-fc", "granite",        "hermes",      "hunyuan_a13b",
        "internlm",        "jamba",          "kimi_k2",        "llama3_json", "llama4_json",
        "llama4_pythonic", "longcat",        "minimax_m2",     "minimax",     "mistral",
        "olmo3",           "openai",         "phi4_mini_json", "pythonic",    "qwen3_coder",
        "qwen3_xml",       "seed_oss",       "step3",          "xlam"}},
      {"reasoning_parsers",
       {"deepseek_r1", "deepseek_v3", "ernie45", "glm45", "openai_gptoss", "granite",
        "hunyuan_a13b", "kimi_k2", "minimax_m2", "minimax_m2_append_think", "mistral", "olmo3",
        "qwen3", "seed_oss", "step3"}},
      {"speculative_methods",
       {"ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "eagle",
        "eagle3", "extract_hidden_states", "mtp", "dflash", "ngram_gpu", "dspark"}},
      {"mtp_model_types",
       {"deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_v4", "deepseek_mtp", "dots3_note",
        "pangu_ultra_moe", "kimi_k3", "qwen3_next", "glm4_moe", "longcat_flash", "step3p5", "hy_v3",
        "hy_v4", "minimax_m3_vl", "glm5_next", "ernie4_5_moe"}},
      {"kv_cache_dtypes",
       {"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"}},
  };
  return t;
}

}  // namespace

std::vector<std::string_view> EngineTable(EngineKind engine, std::string_view table) {
  if (engine != EngineKind::kVllm) return {};
  auto it = VllmTables().find(table);
  return it == VllmTables().end() ? std::vector<std::string_view>{} : it->second;
}

bool InEngineTable(EngineKind engine, std::string_view table, std::string_view value) {
  std::vector<std::string_view> t = EngineTable(engine, table);
  return std::find(t.begin(), t.end(), value) != t.end();
}

}  // namespace berth
