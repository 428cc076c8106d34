// The command line of a model server: which executable, and the engine's flags for the model,
// port, GPUs' memory share and the manifest's args. Pure.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/core/desired.h"

namespace berth {

/// What the renderer needs beyond the service itself.
struct RenderContext {
  std::string store;          // HF cache dir (HF_HUB_CACHE)
  std::string model_repo;     // "org/name", "" when the service has no model
  std::string snapshot_path;  // <store>/models--org--name/snapshots/<commit>
  std::string executable;     // resolved: service > host.executables > engine default
  std::string berth_version;
};

/// The executable: the service's `executable`, else host.executables[engine], else the
/// engine's usual name (systemd resolves a bare name along its fixed search path).
std::string ResolveExecutable(const ServiceSpec& service,
                              const std::map<std::string, std::string>& host_executables);

/// The argv of a service's ExecStart (engine flags, then the manifest's args).
std::vector<std::string> ServiceArgv(const ServiceSpec& service, const RenderContext& ctx);

}  // namespace berth
