#include "engine/core/desired.h"

#include "engine/core/hf_cache.h"

namespace berth {

std::string SourceLoc::ToString() const {
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

const char* EngineName(EngineKind e) {
  switch (e) {
    case EngineKind::kVllm:
      return "vllm";
    case EngineKind::kSglang:
      return "sglang";
    case EngineKind::kLlamaServer:
      return "llama-server";
    case EngineKind::kCommand:
      return "command";
  }
  return "?";
}

const char* ServiceStateName(ServiceState s) {
  switch (s) {
    case ServiceState::kRunning:
      return "running";
    case ServiceState::kStopped:
      return "stopped";
    case ServiceState::kAbsent:
      return "absent";
  }
  return "?";
}

const char* StrategyName(Strategy s) {
  switch (s) {
    case Strategy::kAuto:
      return "auto";
    case Strategy::kStopFirst:
      return "stop-first";
    case Strategy::kStartFirst:
      return "start-first";
  }
  return "?";
}

std::string ServiceSpec::ServedName() const {
  switch (engine) {
    case EngineKind::kVllm:
      if (!vllm.served_model_name.empty()) return vllm.served_model_name;
      break;
    case EngineKind::kSglang:
      if (!sglang.served_model_name.empty()) return sglang.served_model_name;
      break;
    case EngineKind::kLlamaServer:
      if (!llama.alias.empty()) return llama.alias;
      break;
    case EngineKind::kCommand:
      break;
  }
  return name;
}

const LockEntry* Desired::PinFor(const ModelSpec& m) const {
  if (IsCommit(m.revision)) return nullptr;
  auto it = locks.find(m.name);
  if (it == locks.end() || it->second.repo_id != m.repo_id || it->second.revision != m.revision)
    return nullptr;
  return &it->second;
}

}  // namespace berth
