// Rendering the systemd unit of a service, and comparing it with the one on disk. Pure.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/core/desired.h"
#include "engine/core/unit_marker.h"

namespace berth {

/// What the renderer needs beyond the service itself.
struct RenderContext {
  std::string store;          // HF cache dir (HF_HUB_CACHE)
  std::string model_repo;     // "org/name", "" when the service has no model
  std::string snapshot_path;  // <store>/models--org--name/snapshots/<commit>
  std::string executable;     // resolved: service > host.executables > engine default
  std::string berth_version;
};

struct RenderedUnit {
  std::string name;               // "vllm-minimax-m25.service"
  std::string content;            // the whole file, header included
  std::string spec_hash;          // sha256 of the body (what berth compares; the header may change)
  std::vector<std::string> argv;  // ExecStart, unquoted
};

RenderedUnit RenderUnit(const ServiceSpec& service, const RenderContext& ctx);

/// The executable: the service's `executable`, else host.executables[engine], else the
/// engine's usual name (systemd resolves a bare name along its fixed search path).
std::string ResolveExecutable(const ServiceSpec& service,
                              const std::map<std::string, std::string>& host_executables);

/// The argv of a service's ExecStart (engine flags, then the manifest's args).
std::vector<std::string> ServiceArgv(const ServiceSpec& service, const RenderContext& ctx);

/// One argument quoted for ExecStart= by systemd's rules: "…" with \\ \" \n \t \xNN escapes,
/// % → %%, $ → $$.
std::string QuoteExecArg(const std::string& arg);
/// The inverse, for reading an ExecStart= line back into argv.
std::vector<std::string> SplitExecLine(const std::string& line);

/// How the wanted unit differs from the one on disk.
struct UnitDiff {
  bool changed = false;          // any difference in the body
  bool needs_restart = false;    // a difference a running process would not see otherwise
  bool only_model_path = false;  // the only restart-worthy change is the model snapshot path
  std::string detail;            // "ExecStart changed: --port 8000 → 8001"
};
/// Compares two unit files section by section; comments and cosmetic keys (Description,
/// Documentation) never need a restart.
UnitDiff DiffUnits(const std::string& old_content, const std::string& new_content);

}  // namespace berth
