#include "core/desired.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "core/hf_cache.h"

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
    case EngineKind::kTrtllm:
      return "trtllm-serve";
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

const char* StandbyName(Standby s) {
  switch (s) {
    case Standby::kStop:
      return "stop";
    case Standby::kSleep:
      return "sleep";
  }
  return "?";
}

std::string DialAddress(const std::string& bind) {
  std::string a = bind;
  if (a.size() >= 2 && a.front() == '[' && a.back() == ']') a = a.substr(1, a.size() - 2);
  if (a.empty()) return "127.0.0.1";
  in_addr v4{};
  if (inet_pton(AF_INET, a.c_str(), &v4) == 1)
    return v4.s_addr == htonl(INADDR_ANY) ? "127.0.0.1" : a;
  in6_addr v6{};
  if (inet_pton(AF_INET6, a.c_str(), &v6) == 1)
    return std::memcmp(&v6, &in6addr_any, sizeof v6) == 0 ? "::1" : a;
  return a;  // a name ("localhost"): resolved when dialled
}

std::string ServiceSpec::DialHost() const { return DialAddress(bind); }

std::vector<std::string> ServiceSpec::ModelKeys() const {
  std::vector<std::string> keys;
  if (!model.empty()) keys.push_back(model);
  if (!draft_model.empty() && draft_model != model) keys.push_back(draft_model);
  return keys;
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
    case EngineKind::kTrtllm:
      break;
    case EngineKind::kCommand:
      if (!served_name.empty()) return served_name;
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

std::string FrontServiceName(int port) {
  return std::string(kFrontServicePrefix) + std::to_string(port);
}

std::string OnDemandSocketName(const std::string& service) {
  return std::string(kOnDemandPrefix).append(service).append(".socket");
}
std::string OnDemandProxyName(const std::string& service) {
  return std::string(kOnDemandPrefix).append(service).append(".service");
}

std::vector<std::string> ServiceSpec::UnitNames() const {
  std::vector<std::string> names = {UnitName()};
  if (on_demand) {
    names.push_back(OnDemandSocketName(name));
    names.push_back(OnDemandProxyName(name));
  }
  return names;
}

int ServiceSpec::PublicPort() const {
  if (routed_port) return routed_port;
  if (front_port) return front_port;
  if (on_demand) return on_demand->public_port;
  return port.value_or(0);
}

}  // namespace berth
