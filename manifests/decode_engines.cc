// The engine sections of a service (vllm:, sglang:, llama_server:): each decodes into its
// engine's options (engine/core/desired.h), which that engine's adapter (planners/engines/)
// renders.
#include "manifests/decode_engines.h"

#include <climits>
#include <optional>
#include <string>

#include "manifests/did_you_mean.h"
#include "manifests/names.h"
#include "planners/engines/catalogue.h"
#include "planners/engines/vllm.h"

namespace berth::manifests {
namespace {

constexpr std::string_view kVllmKeys[] = {
    "tensor_parallel_size",   "pipeline_parallel_size", "data_parallel_size",
    "enable_expert_parallel", "gpu_memory_utilization", "max_model_len",
    "served_model_name",      "trust_remote_code",      "tool_call_parser",
    "reasoning_parser",       "kv_cache_dtype",         "speculative"};
constexpr std::string_view kSpeculativeKeys[] = {"method",
                                                 "num_speculative_tokens",
                                                 "model",
                                                 "draft_tensor_parallel_size",
                                                 "prompt_lookup_min",
                                                 "prompt_lookup_max"};

// A name from one of the engine's tables in its flag catalogue (planners/engines/catalogue.h):
// anything else is refused here, where the server would refuse it at start.
std::optional<std::string> TableName(YamlReader& r, const Field& f, CatalogueEngine engine,
                                     std::string_view table, std::string_view what) {
  std::optional<std::string> v = r.String(f);
  if (!v) return std::nullopt;
  const EngineCatalogue& c = Catalogue(engine);
  if (c.InTable(table, *v)) return v;
  std::vector<std::string_view> names(c.Table(table).begin(), c.Table(table).end());
  std::string hint = DidYouMean(*v, names);
  if (hint.empty()) {
    hint = "one of ";
    for (size_t i = 0; i < names.size(); ++i) hint.append(i ? ", " : "").append(names[i]);
  }
  r.Error(f.value_loc,
          std::string(CatalogueEngineName(engine)) + " has no " + std::string(what) + " '" + *v +
              "' (the catalogue of the release berth was checked against)",
          hint);
  return std::nullopt;
}

// vllm.speculative: {method, num_speculative_tokens, model, ...}.
void DecodeSpeculative(YamlReader& r, const Field& block, VllmSpeculative* sp,
                       SourceLoc* model_loc) {
  bool has_tokens = false;
  const Field* model = nullptr;
  const Field* method = nullptr;
  // Kept: `method` and `model` point into it after the loop.
  const std::vector<Field> fields = r.Entries(block.value, kSpeculativeKeys, "in vllm.speculative");
  for (const Field& f : fields) {
    if (f.key == "method") {
      method = &f;
      if (auto v =
              TableName(r, f, CatalogueEngine::kVllm, "speculative_methods", "speculative method"))
        sp->method = *v;
    } else if (f.key == "num_speculative_tokens") {
      has_tokens = true;
      if (auto v = PositiveInt(r, f)) sp->num_speculative_tokens = *v;
    } else if (f.key == "model") {
      model = &f;
      if (auto v = r.String(f)) {
        sp->model = *v;
        *model_loc = f.value_loc;
      }
    } else if (f.key == "draft_tensor_parallel_size") {
      if (auto v = PositiveInt(r, f)) sp->draft_tensor_parallel_size = *v;
    } else if (f.key == "prompt_lookup_min") {
      if (auto v = PositiveInt(r, f)) sp->prompt_lookup_min = *v;
    } else if (f.key == "prompt_lookup_max") {
      if (auto v = PositiveInt(r, f)) sp->prompt_lookup_max = *v;
    }
  }
  if (method == nullptr)
    r.Error(block.key_loc, "vllm.speculative needs 'method'", "e.g. method: eagle3");
  if (!has_tokens)
    r.Error(block.key_loc, "vllm.speculative needs 'num_speculative_tokens'",
            "the number of tokens the draft proposes per step, e.g. num_speculative_tokens: 3");
  if (sp->method.empty()) return;
  // speculative.py: "deepseek_mtp" and the other MTP model types are old names vLLM reads as
  // mtp (with a deprecation warning); berth's checks know the method by its name.
  if (sp->method != "mtp" && sp->method.ends_with("_mtp")) {
    r.Error(method->value_loc,
            "vllm.speculative.method " + sp->method + " is vLLM's deprecated name of method mtp",
            "write method: mtp");
    sp->method.clear();
    return;
  }
  // vllm/config/speculative.py, SpeculativeConfig.__post_init__.
  if (sp->method == "custom_class") {
    r.Error(method->value_loc,
            "vllm.speculative.method custom_class takes a Python class path, which berth does "
            "not render",
            "choose a method with a draft model (eagle3, draft_model) or none (ngram, mtp)");
    return;
  }
  DraftModelRule rule = VllmDraftModelRule(sp->method);
  if (rule == DraftModelRule::kRequired && model == nullptr)
    r.Error(method->value_loc,
            "vllm.speculative.method " + sp->method +
                " needs a draft model: vLLM refuses it without one (\"num_speculative_tokens "
                "was provided but without speculative model\")",
            "add model: naming a key of models (the draft checkpoint)");
  if (rule == DraftModelRule::kRefused && model != nullptr)
    r.Error(model->key_loc,
            "vllm.speculative.method " + sp->method + " takes no draft model: " +
                (sp->method == "mtp" ? "it drafts with the target model's own MTP layers"
                                     : "it drafts from the prompt and the output"),
            "remove model:, or choose a method that takes one (eagle3, draft_model)");
  if ((sp->prompt_lookup_min || sp->prompt_lookup_max) && sp->method != "ngram" &&
      sp->method != "ngram_gpu")
    r.Error(block.key_loc, "prompt_lookup_min and prompt_lookup_max apply to method ngram only");
  if (sp->prompt_lookup_min && sp->prompt_lookup_max &&
      *sp->prompt_lookup_min > *sp->prompt_lookup_max)
    r.Error(block.key_loc, "vllm.speculative.prompt_lookup_min must be at most prompt_lookup_max");
}
constexpr std::string_view kSglangKeys[] = {"tp_size", "mem_fraction_static", "context_length",
                                            "served_model_name"};
constexpr std::string_view kLlamaKeys[] = {"n_gpu_layers", "ctx_size", "model_file", "alias"};

}  // namespace

// A fraction in (0, 1]: gpu_memory_utilization, mem_fraction_static.
std::optional<double> Fraction(YamlReader& r, const Field& f) {
  std::optional<double> v = r.Number(f);
  if (v && !(*v > 0 && *v <= 1)) {
    r.Error(f.value_loc,
            "'" + f.key + "' must be greater than 0 and at most 1, got " + f.value.Scalar());
    return std::nullopt;
  }
  return v;
}

std::optional<int> PositiveInt(YamlReader& r, const Field& f) {
  std::optional<int64_t> v = r.Int(f, 1, INT_MAX);
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}

// Returns false if a value was rejected (the tp x pp check then stays quiet).
bool DecodeVllm(YamlReader& r, const Field& block, VllmOptions* o, SourceLoc* draft_model_loc) {
  bool ok = true;
  for (const Field& f : r.Entries(block.value, kVllmKeys, "in vllm")) {
    if (f.key == "tensor_parallel_size") {
      auto v = PositiveInt(r, f);
      ok = ok && v.has_value();
      if (v) o->tensor_parallel_size = *v;
    } else if (f.key == "pipeline_parallel_size") {
      auto v = PositiveInt(r, f);
      ok = ok && v.has_value();
      if (v) o->pipeline_parallel_size = *v;
    } else if (f.key == "data_parallel_size") {
      auto v = PositiveInt(r, f);
      ok = ok && v.has_value();
      if (v) o->data_parallel_size = *v;
    } else if (f.key == "trust_remote_code") {
      if (auto v = r.Bool(f)) o->trust_remote_code = *v;
    } else if (f.key == "tool_call_parser") {
      if (auto v = TableName(r, f, CatalogueEngine::kVllm, "tool_call_parsers", "tool-call parser"))
        o->tool_call_parser = *v;
    } else if (f.key == "reasoning_parser") {
      if (auto v = TableName(r, f, CatalogueEngine::kVllm, "reasoning_parsers", "reasoning parser"))
        o->reasoning_parser = *v;
    } else if (f.key == "kv_cache_dtype") {
      if (auto v = TableName(r, f, CatalogueEngine::kVllm, "kv_cache_dtypes", "KV-cache dtype"))
        o->kv_cache_dtype = *v;
    } else if (f.key == "speculative") {
      if (!r.ExpectMap(f)) continue;
      VllmSpeculative sp;
      DecodeSpeculative(r, f, &sp, draft_model_loc);
      o->speculative = sp;
    } else if (f.key == "enable_expert_parallel") {
      if (auto v = r.Bool(f)) o->enable_expert_parallel = *v;
    } else if (f.key == "gpu_memory_utilization") {
      if (auto v = Fraction(r, f)) o->gpu_memory_utilization = *v;
    } else if (f.key == "max_model_len") {
      if (auto v = PositiveInt(r, f)) o->max_model_len = static_cast<uint64_t>(*v);
    } else if (f.key == "served_model_name") {
      if (auto v = r.String(f); v && r.UnitValue(f.value_loc, f.key, *v)) o->served_model_name = *v;
    }
  }
  return ok;
}

bool DecodeSglang(YamlReader& r, const Field& block, SglangOptions* o) {
  bool ok = true;
  for (const Field& f : r.Entries(block.value, kSglangKeys, "in sglang")) {
    if (f.key == "tp_size") {
      auto v = PositiveInt(r, f);
      ok = ok && v.has_value();
      if (v) o->tp_size = *v;
    } else if (f.key == "mem_fraction_static") {
      if (auto v = Fraction(r, f)) o->mem_fraction_static = *v;
    } else if (f.key == "context_length") {
      if (auto v = PositiveInt(r, f)) o->context_length = static_cast<uint64_t>(*v);
    } else if (f.key == "served_model_name") {
      if (auto v = r.String(f); v && r.UnitValue(f.value_loc, f.key, *v)) o->served_model_name = *v;
    }
  }
  return ok;
}

void DecodeLlama(YamlReader& r, const Field& block, LlamaServerOptions* o) {
  for (const Field& f : r.Entries(block.value, kLlamaKeys, "in llama_server")) {
    if (f.key == "n_gpu_layers") {
      if (auto v = r.Int(f, -1, INT_MAX)) o->n_gpu_layers = static_cast<int>(*v);
    } else if (f.key == "ctx_size") {
      if (auto v = PositiveInt(r, f)) o->ctx_size = static_cast<uint64_t>(*v);
    } else if (f.key == "model_file") {
      std::optional<std::string> v = r.String(f);
      if (v && !r.UnitValue(f.value_loc, f.key, *v)) {
        // reported
      } else if (v && !IsSnapshotRelativePath(*v)) {
        r.Error(f.value_loc,
                "'model_file' must be a path inside the model snapshot, got '" + *v + "'",
                "e.g. model_file: Q4_K_M/model-00001-of-00002.gguf");
      } else if (v) {
        o->model_file = *v;
      }
    } else if (f.key == "alias") {
      if (auto v = r.String(f); v && r.UnitValue(f.value_loc, f.key, *v)) o->alias = *v;
    }
  }
}

}  // namespace berth::manifests
