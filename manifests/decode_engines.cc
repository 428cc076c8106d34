// The engine sections of a service (vllm:, sglang:, llama_server:): each decodes into its
// engine's options (engine/core/desired.h), which that engine's adapter (planners/engines/)
// renders.
#include "manifests/decode_engines.h"

#include <climits>
#include <optional>
#include <string>

#include "manifests/names.h"

namespace berth::manifests {
namespace {

constexpr std::string_view kVllmKeys[] = {"tensor_parallel_size",   "pipeline_parallel_size",
                                          "enable_expert_parallel", "gpu_memory_utilization",
                                          "max_model_len",          "served_model_name"};
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
bool DecodeVllm(YamlReader& r, const Field& block, VllmOptions* o) {
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
