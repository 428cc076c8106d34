#include "planners/preflight.h"

#include <cstdint>
#include <cstdio>
#include <map>

#include "core/units.h"
#include "planners/feasibility.h"
#include "planners/servers/adapter.h"

namespace berth {
namespace {

const ResolvedModel* ModelOf(const ServiceSpec& s, const std::vector<ResolvedModel>& models) {
  return FindResolved(models, s.model);
}

// llama-server's model file, from the GGUF headers the store scan read: it must be in the
// complete snapshot and be GGUF of a version llama.cpp reads.
std::optional<Problem> GgufPreflight(const Transition& t, const ResolvedModel* m) {
  const ServiceSpec& s = *t.spec;
  if (!m || s.llama.model_file.empty() || !m->present || !m->present->complete || !m->present->gguf)
    return std::nullopt;
  const std::map<std::string, GgufHeader>& files = *m->present->gguf;
  const std::string where = m->spec->repo_id + "@" + m->present->commit.substr(0, 7);
  Problem p;
  p.resource = "model/" + m->spec->name;
  auto it = files.find(s.llama.model_file);
  if (it == files.end()) {
    std::string names;
    for (const auto& [f, h] : files) {
      if (names.size() > 300) {
        names += ", ...";
        break;
      }
      names += (names.empty() ? "" : ", ") + f;
    }
    p.message = t.address + " cannot start: its model_file " + s.llama.model_file +
                " is not a .gguf file of " + where + " (its .gguf files: " + names +
                "). Set llama_server.model_file to one of them";
    return p;
  }
  if (it->second.problem.empty()) return std::nullopt;
  p.message = t.address + " cannot start: " + s.llama.model_file + " of " + where + " " +
              it->second.problem +
              ", so llama-server cannot load it. Check llama_server.model_file and the revision, "
              "and download it again if the file is damaged";
  return p;
}

}  // namespace

std::vector<Problem> ModelPreflight(const Transition& t, const std::vector<ResolvedModel>& models,
                                    HostLedger& host) {
  std::vector<Problem> out;
  if (!t.spec || !t.spec->has_engine) return out;
  const ServiceSpec& s = *t.spec;
  if (s.engine == EngineKind::kLlamaServer) {
    if (std::optional<Problem> p = GgufPreflight(t, ModelOf(s, models))) out.push_back(*p);
    return out;
  }
  const EngineAdapter& engine = AdapterFor(s.engine);
  std::optional<WeightSplit> split = engine.Split(s);
  std::optional<std::pair<double, std::string>> share = engine.MemoryShare(s);
  if (!split || !share) return out;
  const ResolvedModel* m = ModelOf(s, models);
  if (!m) return out;
  const std::string model = "model/" + m->spec->name;

  // config.json: the engine reads it first; a model it cannot load is found out here, not after
  // the stop.
  if (m->present && m->present->complete && m->present->config &&
      !m->present->config->problem.empty()) {
    Problem p;
    p.resource = model;
    p.message = t.address + " cannot start on " + model + ": config.json of " + m->spec->repo_id +
                "@" + m->present->commit.substr(0, 7) + " " + m->present->config->problem +
                ", so " + EngineName(s.engine) +
                " cannot tell which architecture to load. Check the revision (berth.lock, "
                "revision:) or the repository, and download it again if the file is damaged";
    out.push_back(p);
  }

  // What the engine refuses of this model, read from its config.json (vLLM: speculative
  // method mtp on a model type with no MTP draft): found here, not after the stop.
  if (m->present && m->present->complete && m->present->config &&
      m->present->config->problem.empty()) {
    if (std::optional<EngineRefusal> no = engine.ModelConfigProblem(s, *m->present->config)) {
      std::string hint = no->hint;
      if (!hint.empty() && hint[0] >= 'a' && hint[0] <= 'z')
        hint[0] = static_cast<char>(hint[0] - 'a' + 'A');
      Problem p;
      p.resource = model;
      p.message = t.address + " (" + s.loc.ToString() + ") cannot start on " + model + " (" +
                  m->spec->repo_id + "@" + m->present->commit.substr(0, 7) + "): " + no->message +
                  ". " + hint;
      out.push_back(p);
    }
  }

  // Weights against the memory the service claims on each GPU.
  if (!m->weights_bytes || s.gpus.empty() || !host.gpus_known()) return out;
  if (split->ways <= 0) return out;
  uint64_t per_gpu = *m->weights_bytes / static_cast<uint64_t>(split->ways);
  uint64_t claim = UINT64_MAX;
  int at = -1;
  for (int i : s.gpus) {
    if (!host.HasGpu(i)) continue;
    uint64_t c = host.Claim(s, i);
    if (c < claim) {
      claim = c;
      at = i;
    }
  }
  if (at < 0 || per_gpu <= claim) return out;
  Problem p;
  p.resource = "gpu " + GpuList(s.gpus);
  p.needed = per_gpu;
  p.available = claim;
  p.message = t.address + " cannot load " + model + ": its weights are " +
              FormatBytes(*m->weights_bytes) + " (*.safetensors " + m->weights_source + "), " +
              FormatGiB(per_gpu) + " per GPU over " + split->words + ", but the service claims " +
              FormatGiB(claim) + " of GPU " + std::to_string(at) + " (" + share->second + " " +
              FormatDouble(share->first) + " of " + FormatGiB(host.Total(at)) + "): short by " +
              FormatGiB(per_gpu - claim) +
              " before any KV cache. Give it more GPUs (gpus and tensor_parallel_size), raise " +
              "its memory share, or serve a smaller (quantized) revision";
  out.push_back(p);
  return out;
}

std::optional<Action> PreflightAction(const ServiceSpec& s, const std::string& address) {
  if (!s.preflight || s.preflight->command.empty()) return std::nullopt;
  Action a = MakeAction(ActionKind::kPreflight, address, Reason::kPreflight);
  a.unit = s.UnitName();
  PreflightStep& p = a.As<PreflightStep>();
  p.argv = s.preflight->command;
  p.timeout_ms = s.preflight->timeout_ms;
  std::string cmd;
  for (const auto& x : p.argv) {
    if (!cmd.empty()) cmd += ' ';
    cmd += x;
  }
  a.detail = "run " + cmd + " (timeout " + FormatDurationMs(p.timeout_ms) +
             "): must exit 0 before anything is stopped";
  return a;
}

bool WantsEngineCheck(const ServiceSpec& s) {
  if (!s.has_engine) return false;
  if (s.preflight && !s.preflight->engine_check) return false;
  return s.engine == EngineKind::kVllm || s.engine == EngineKind::kSglang ||
         s.engine == EngineKind::kLlamaServer;
}

Action EngineCheckAction(const ServiceSpec& s, const std::string& address, UnitExec exec) {
  Action a = MakeAction(ActionKind::kPreflight, address, Reason::kEngineCheck);
  a.unit = s.UnitName();
  PreflightStep& p = a.As<PreflightStep>();
  p.engine = EngineName(s.engine);
  p.argv = std::move(exec.argv);
  p.env = std::move(exec.env);
  p.env_file = std::move(exec.env_file);
  p.timeout_ms = s.preflight ? s.preflight->timeout_ms : PreflightSpec{}.timeout_ms;
  const std::string exe = p.argv.empty() ? std::string() : p.argv[0];
  std::string what;
  switch (s.engine) {
    case EngineKind::kVllm:
      p.check_program = "vllm_check.py";
      what = "vLLM's own argument parser and engine config for this argv (engine-check/" +
             p.check_program + " run by the interpreter of " + exe + ")";
      break;
    case EngineKind::kSglang:
      p.check_program = "sglang_check.py";
      what = "SGLang's own ServerArgs parsing and checks for this argv (engine-check/" +
             p.check_program + " run by the interpreter of " + exe + ")";
      break;
    default:
      what = "llama-server's own argument parser on this argv (" + exe +
             " ... --help), then llama-fit-params next to it on the model file and context (the "
             "flags it accepts)";
      break;
  }
  a.detail = "engine check: " + what + ", loading no weights (timeout " +
             FormatDurationMs(p.timeout_ms) + "): must pass before anything is stopped";
  return a;
}

}  // namespace berth
