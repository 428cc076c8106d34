// Engine adapters: everything berth knows of one model server (vLLM, SGLang, llama.cpp's
// llama-server, TensorRT-LLM's trtllm-serve, or an operator's own command): its executable, the
// command line it renders from the manifest's keys, the flags that command line owns (so that
// `args` cannot override them), the name the server reports once ready, the GPU-count rule and
// how its weights are split. The planner asks the adapter; the manifest loader asks it which
// flags `args` may not name. Adding an engine is adding one adapter (a file here, a line in
// AdapterFor) and the decoder of its manifest section. Pure: no I/O.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/desired.h"
#include "core/model_config.h"

namespace berth {

/// What rendering needs beyond the service itself.
struct RenderContext {
  std::string store;          // HF cache dir (HF_HUB_CACHE)
  std::string model_repo;     // "org/name", "" when the service has no model
  std::string snapshot_path;  // <store>/models--org--name/snapshots/<commit>
  /// The snapshot of the service's draft_model (speculative decoding); "" when it has none.
  std::string draft_snapshot_path;
  std::string executable;  // resolved: service > host.executables > engine default
  std::string berth_version;
  /// On-demand services: berth's own executable, which the units run (`berth __wait-healthy`,
  /// `berth __wake-proxy`): host.executables.berth, else PlanOptions::berth_executable.
  std::string berth_executable;
  /// On-demand services: the units of the other members of its swap group (Conflicts=).
  std::vector<std::string> conflicts;
};

/// A flag berth renders, in every spelling the engine accepts, and the manifest key that sets
/// it: `args: [--port, "9000"]` is refused with "--port is set by `port:`".
struct OwnedFlag {
  std::vector<std::string> spellings;  // "--tensor-parallel-size", "-tp"
  std::string set_by;                  // "vllm.tensor_parallel_size"
};

/// How the weights are laid on the GPUs: one copy split `ways` ways, `replicas` copies.
struct WeightSplit {
  int ways = 1;
  int replicas = 1;
  std::string words;  // "tensor_parallel_size 4 × pipeline_parallel_size 2"
};

/// A rule of the engine the service breaks: what, and what to do.
struct EngineRefusal {
  std::string message;
  std::string hint;
};

class EngineAdapter {
 public:
  virtual ~EngineAdapter() = default;
  virtual EngineKind kind() const = 0;
  /// The executable when neither the service nor host.executables names one; systemd resolves
  /// a bare name along its fixed search path.
  virtual std::string DefaultExecutable() const = 0;
  /// ExecStart's words before the manifest's `args`.
  virtual std::vector<std::string> Argv(const ServiceSpec& s, const RenderContext& ctx) const = 0;
  /// The flags Argv renders for `s` (what `args` may not name).
  virtual std::vector<OwnedFlag> OwnedFlags(const ServiceSpec& s) const = 0;
  /// The model id the server lists in /v1/models once it serves ("" when berth cannot know it:
  /// the health gate then checks the health path alone).
  virtual std::string ReportedName(const ServiceSpec& s, const RenderContext& ctx) const;
  /// Why `gpus` does not suit the engine's parallel sizes (nullopt when it does, or when the
  /// engine has no rule).
  virtual std::optional<EngineRefusal> GpuCountProblem(const ServiceSpec& s, size_t gpus) const;
  /// How the weights are split over the GPUs, for the weights-fit check; nullopt for an engine
  /// whose model is no checkpoint berth can weigh.
  virtual std::optional<WeightSplit> Split(const ServiceSpec& s) const;
  /// The share of each GPU the engine takes, with the key's name ("gpu_memory_utilization");
  /// nullopt when the service's `gpu_memory:` says what it claims.
  virtual std::optional<std::pair<double, std::string>> MemoryShare(const ServiceSpec& s) const;
  /// Why the engine cannot serve `s` on a model whose config.json reads `config` (vLLM: method
  /// mtp on a model type with no MTP draft); nullopt when it can, or cannot tell.
  virtual std::optional<EngineRefusal> ModelConfigProblem(const ServiceSpec& s,
                                                          const ModelConfig& config) const;
};

/// The adapter of `engine`.
const EngineAdapter& AdapterFor(EngineKind engine);

/// The executable: the service's `executable`, else host.executables[engine], else the
/// adapter's default.
std::string ResolveExecutable(const ServiceSpec& service,
                              const std::map<std::string, std::string>& host_executables);

/// The argv of a service's ExecStart: the adapter's words, then the manifest's args.
std::vector<std::string> ServiceArgv(const ServiceSpec& service, const RenderContext& ctx);

/// The first of `args` that names a flag berth renders for `s` ("--port", "--port=9000",
/// "-tp"), with the key that sets it; nullopt when none does.
struct ArgConflict {
  size_t index = 0;  // into args
  std::string flag;
  std::string set_by;
};
std::optional<ArgConflict> FindOwnedFlag(const ServiceSpec& s,
                                         const std::vector<std::string>& args);

}  // namespace berth
