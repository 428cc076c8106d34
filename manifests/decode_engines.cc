// The engine sections of a service (vllm:, sglang:, llama_server:, trtllm:): each decodes into its
// engine's options (core/desired.h), which that engine's adapter (planners/servers/)
// renders.
#include "manifests/decode_engines.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <string>

#include "manifests/did_you_mean.h"
#include "manifests/names.h"
#include "planners/servers/catalogue.h"
#include "planners/servers/vllm.h"

namespace berth::manifests {
namespace {

constexpr std::string_view kVllmKeys[] = {"tensor_parallel_size",
                                          "pipeline_parallel_size",
                                          "data_parallel_size",
                                          "enable_expert_parallel",
                                          "gpu_memory_utilization",
                                          "max_model_len",
                                          "max_num_seqs",
                                          "served_model_name",
                                          "trust_remote_code",
                                          "tool_call_parser",
                                          "reasoning_parser",
                                          "kv_cache_dtype",
                                          "speculative"};
constexpr std::string_view kSpeculativeKeys[] = {"method",
                                                 "num_speculative_tokens",
                                                 "model",
                                                 "draft_tensor_parallel_size",
                                                 "prompt_lookup_min",
                                                 "prompt_lookup_max"};

// A name from one of the engine's tables in its flag catalogue (planners/servers/catalogue.h):
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
constexpr std::string_view kSglangKeys[] = {"tp_size",
                                            "dp_size",
                                            "ep_size",
                                            "enable_dp_attention",
                                            "mem_fraction_static",
                                            "context_length",
                                            "served_model_name",
                                            "trust_remote_code",
                                            "tool_call_parser",
                                            "reasoning_parser",
                                            "kv_cache_dtype",
                                            "speculative"};
constexpr std::string_view kSglangSpeculativeKeys[] = {"algorithm", "num_steps", "eagle_topk",
                                                       "num_draft_tokens", "draft_model"};
constexpr std::string_view kLlamaKeys[] = {
    "n_gpu_layers", "ctx_size",   "model_file",  "alias",        "jinja",        "parallel",
    "threads",      "batch_size", "ubatch_size", "cache_type_k", "cache_type_v", "split_mode"};
constexpr std::string_view kTrtllmKeys[] = {"tp_size",
                                            "pp_size",
                                            "ep_size",
                                            "backend",
                                            "max_seq_len",
                                            "trust_remote_code",
                                            "extra_llm_api_options"};

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
    } else if (f.key == "max_num_seqs") {
      if (auto v = PositiveInt(r, f)) o->max_num_seqs = *v;
    } else if (f.key == "served_model_name") {
      if (auto v = r.String(f); v && r.UnitValue(f.value_loc, f.key, *v)) o->served_model_name = *v;
    }
  }
  return ok;
}

namespace {

// The engine's own values for a key, from its flag catalogue (planners/servers/catalogue/
// <engine>.json, generated from the engine's source at the release it names): a table
// ("tool_call_parsers") or a flag's choices ("--split-mode").
const std::vector<std::string>& Values(CatalogueEngine e, std::string_view table_or_flag) {
  const EngineCatalogue& c = Catalogue(e);
  if (table_or_flag.starts_with("--")) {
    static const std::vector<std::string> kNone;
    const CatalogueFlag* f = c.Find(table_or_flag);
    return f ? f->choices : kNone;
  }
  return c.Table(table_or_flag);
}

// The value an operator most likely meant: another engine's spelling of it (vLLM's fp8 is
// SGLang's fp8_e4m3; vLLM's minimax_m2_append_think is SGLang's minimax-append-think), else the
// closest by edit distance once '_' and '-' are read alike, else DidYouMean's.
std::string Nearest(const std::string& word, const std::vector<std::string>& values) {
  auto has = [&](std::string_view x) {
    return std::find(values.begin(), values.end(), x) != values.end();
  };
  if (word == "fp8" && has("fp8_e4m3")) return "did you mean 'fp8_e4m3'?";
  auto plain = [](std::string x) {
    std::replace(x.begin(), x.end(), '_', '-');
    return x;
  };
  const std::string w = plain(word);
  size_t best = 4;
  std::string pick;
  for (const std::string& v : values)
    if (size_t d = EditDistance(w, plain(v)); d < best && d * 2 <= w.size()) {
      best = d;
      pick = v;
    }
  if (!pick.empty()) return "did you mean '" + pick + "'?";
  std::vector<std::string_view> names(values.begin(), values.end());
  return DidYouMean(word, names);
}

// One of the engine's own values (a parser, a dtype): anything else is refused with the
// nearest spelling, since the engine would refuse it at start, or (a parser) quietly serve
// tool calls as text.
std::optional<std::string> Choice(YamlReader& r, const Field& f, EngineKind e,
                                  std::string_view table_or_flag, std::string_view what) {
  std::optional<std::string> v = r.String(f);
  if (!v) return std::nullopt;
  const CatalogueEngine which = e == EngineKind::kSglang   ? CatalogueEngine::kSglang
                                : e == EngineKind::kTrtllm ? CatalogueEngine::kTrtllm
                                                           : CatalogueEngine::kLlamaServer;
  const std::vector<std::string>& values = Values(which, table_or_flag);
  if (std::find(values.begin(), values.end(), *v) != values.end()) return v;
  std::string hint = Nearest(*v, values);
  if (hint.empty()) {
    hint = "one of:";
    for (const std::string& n : values) hint += " " + n;
  }
  r.Error(f.value_loc,
          "'" + f.key + "' '" + *v + "' is not one of " + EngineName(e) + "'s " + std::string(what),
          hint);
  return std::nullopt;
}

void DecodeSglangSpeculative(YamlReader& r, const Field& block, SglangSpeculative* o,
                             SourceLoc* draft_model_loc) {
  bool has_algorithm = false;
  for (const Field& f : r.Entries(block.value, kSglangSpeculativeKeys, "in sglang.speculative")) {
    if (f.key == "algorithm") {
      has_algorithm = true;
      if (auto v =
              Choice(r, f, EngineKind::kSglang, "speculative_methods", "speculative algorithms"))
        o->algorithm = *v;
    } else if (f.key == "num_steps") {
      if (auto v = PositiveInt(r, f)) o->num_steps = *v;
    } else if (f.key == "eagle_topk") {
      if (auto v = PositiveInt(r, f)) o->eagle_topk = *v;
    } else if (f.key == "num_draft_tokens") {
      if (auto v = PositiveInt(r, f)) o->num_draft_tokens = *v;
    } else if (f.key == "draft_model") {
      *draft_model_loc = f.value_loc;
      if (auto v = r.String(f)) o->draft_model = *v;
    }
  }
  if (!has_algorithm) {
    r.Error(block.key_loc, "sglang.speculative needs 'algorithm'",
            "e.g. speculative: {algorithm: EAGLE3, draft_model: my-eagle3-head, num_steps: 3}");
    return;
  }
  // SGLang's EAGLE3 and STANDALONE draft with a model of their own; NGRAM drafts from the
  // prompt and loads none (server_args.py, _handle_speculative_decoding).
  bool needs_draft = o->algorithm == "EAGLE3" || o->algorithm == "STANDALONE";
  if (needs_draft && o->draft_model.empty())
    r.Error(block.key_loc, "speculative algorithm " + o->algorithm + " needs 'draft_model'",
            "name the draft model's key of models:, e.g. draft_model: my-eagle3-head");
  if (o->algorithm == "NGRAM" && !o->draft_model.empty())
    r.Error(*draft_model_loc, "speculative algorithm NGRAM loads no draft model",
            "remove draft_model");
}

}  // namespace

bool DecodeSglang(YamlReader& r, const Field& block, SglangOptions* o, SourceLoc* draft_model_loc) {
  bool ok = true;
  auto size = [&](const Field& f, int* out) {
    auto v = PositiveInt(r, f);
    ok = ok && v.has_value();
    if (v) *out = *v;
  };
  for (const Field& f : r.Entries(block.value, kSglangKeys, "in sglang")) {
    if (f.key == "tp_size") {
      size(f, &o->tp_size);
    } else if (f.key == "dp_size") {
      size(f, &o->dp_size);
    } else if (f.key == "ep_size") {
      size(f, &o->ep_size);
    } else if (f.key == "enable_dp_attention") {
      auto v = r.Bool(f);
      ok = ok && v.has_value();
      if (v) o->enable_dp_attention = *v;
    } else if (f.key == "mem_fraction_static") {
      if (auto v = Fraction(r, f)) o->mem_fraction_static = *v;
    } else if (f.key == "context_length") {
      if (auto v = PositiveInt(r, f)) o->context_length = static_cast<uint64_t>(*v);
    } else if (f.key == "served_model_name") {
      if (auto v = r.String(f); v && r.UnitValue(f.value_loc, f.key, *v)) o->served_model_name = *v;
    } else if (f.key == "trust_remote_code") {
      if (auto v = r.Bool(f)) o->trust_remote_code = *v;
    } else if (f.key == "tool_call_parser") {
      if (auto v = Choice(r, f, EngineKind::kSglang, "tool_call_parsers", "tool-call parsers"))
        o->tool_call_parser = *v;
    } else if (f.key == "reasoning_parser") {
      if (auto v = Choice(r, f, EngineKind::kSglang, "reasoning_parsers", "reasoning parsers"))
        o->reasoning_parser = *v;
    } else if (f.key == "kv_cache_dtype") {
      if (auto v = Choice(r, f, EngineKind::kSglang, "kv_cache_dtypes", "KV-cache dtypes"))
        o->kv_cache_dtype = *v;
    } else if (f.key == "speculative") {
      if (r.ExpectMap(f)) DecodeSglangSpeculative(r, f, &o->speculative, draft_model_loc);
    }
  }
  return ok;
}

void DecodeLlama(YamlReader& r, const Field& block, LlamaServerOptions* o) {
  for (const Field& f : r.Entries(block.value, kLlamaKeys, "in llama_server")) {
    if (f.key == "n_gpu_layers") {
      // common/arg.cpp: -ngl takes a number of layers, "auto" or "all"; -1 is "auto" there
      // now, so berth takes no negative number.
      if (YamlReader::KindOf(f.value) == ScalarKind::kString) {
        std::string v = f.value.Scalar();
        if (v == "auto" || v == "all")
          o->n_gpu_layers = v;
        else
          r.Error(f.value_loc,
                  "'n_gpu_layers' must be a number of layers, 'auto' or 'all', got '" + v + "'");
      } else if (YamlReader::KindOf(f.value) == ScalarKind::kInt && f.value.Scalar() == "-1") {
        r.Error(f.value_loc, "'n_gpu_layers' -1 is llama.cpp's 'auto' now, not 'all'",
                "write n_gpu_layers: all to put every layer on the GPU, or auto to let "
                "llama-server fit them to the free memory");
      } else if (auto v = r.Int(f, 0, INT_MAX)) {
        o->n_gpu_layers = std::to_string(*v);
      }
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
    } else if (f.key == "jinja") {
      if (auto v = r.Bool(f)) o->jinja = *v;
    } else if (f.key == "parallel") {
      if (auto v = PositiveInt(r, f)) o->parallel = *v;
    } else if (f.key == "threads") {
      if (auto v = PositiveInt(r, f)) o->threads = *v;
    } else if (f.key == "batch_size") {
      if (auto v = PositiveInt(r, f)) o->batch_size = *v;
    } else if (f.key == "ubatch_size") {
      if (auto v = PositiveInt(r, f)) o->ubatch_size = *v;
    } else if (f.key == "cache_type_k" || f.key == "cache_type_v") {
      if (auto v = Choice(r, f, EngineKind::kLlamaServer, "kv_cache_dtypes", "KV-cache types"))
        (f.key == "cache_type_k" ? o->cache_type_k : o->cache_type_v) = *v;
    } else if (f.key == "split_mode") {
      if (auto v = Choice(r, f, EngineKind::kLlamaServer, "--split-mode", "split modes"))
        o->split_mode = *v;
    }
  }
}

bool DecodeTrtllm(YamlReader& r, const Field& block, TrtllmOptions* o) {
  bool ok = true;
  for (const Field& f : r.Entries(block.value, kTrtllmKeys, "in trtllm")) {
    if (f.key == "tp_size" || f.key == "pp_size" || f.key == "ep_size") {
      auto v = PositiveInt(r, f);
      ok = ok && v.has_value();
      if (!v) continue;
      if (f.key == "tp_size") o->tp_size = *v;
      if (f.key == "pp_size") o->pp_size = *v;
      if (f.key == "ep_size") o->ep_size = *v;
    } else if (f.key == "backend") {
      if (auto v = Choice(r, f, EngineKind::kTrtllm, "--backend", "backends")) o->backend = *v;
    } else if (f.key == "trust_remote_code") {
      if (auto v = r.Bool(f)) o->trust_remote_code = *v;
    } else if (f.key == "max_seq_len") {
      if (auto v = PositiveInt(r, f)) o->max_seq_len = static_cast<uint64_t>(*v);
    } else if (f.key == "extra_llm_api_options") {
      // trtllm-serve opens it from its own working directory: only an absolute path says
      // which file that is.
      if (auto v = r.AbsolutePath(f);
          v && r.UnitValue(f.value_loc, f.key, *v, UnitTextUse::kQuoted))
        o->extra_llm_api_options = *v;
    }
  }
  return ok;
}

}  // namespace berth::manifests
