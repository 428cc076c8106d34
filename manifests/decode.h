// One manifest file decoded on its own: the rules that need only that file. Rules across files
// (a name defined twice, model references, ports) are in merge.h.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/desired.h"
#include "manifests/loader.h"

namespace berth::manifests {

/// A service plus where its cross-checked values were written.
struct ServiceDraft {
  ServiceSpec spec;
  SourceLoc model_loc;              // the `model:` value; line 0 when absent
  SourceLoc port_loc;               // the `port:` value; line 0 when absent
  SourceLoc draft_model_loc;        // the speculative draft model's value; line 0 when absent
  std::optional<int> backend_port;  // `backend_port:` (behind a front)
  SourceLoc backend_port_loc;
  SourceLoc bind_loc;              // the `bind:` value; line 0 when absent
  SourceLoc standby_loc;           // the `standby:` value; line 0 when absent
  SourceLoc on_demand_loc;         // the `on_demand:` value; line 0 when absent
  std::optional<int> server_port;  // `server_port:` (on demand)
  SourceLoc server_port_loc;
  SourceLoc swap_group_loc;  // the `swap_group:` value; line 0 when absent
};

struct FilePart {
  std::string file;
  bool has_host = false;
  HostSpec host;
  bool has_fleet = false;
  FleetSpec fleet;
  std::map<std::string, std::string> executables;  // host.executables
  std::vector<ModelSpec> models;                   // in source order
  std::vector<ServiceDraft> services;              // in source order
  std::vector<FrontDecl> fronts;                   // in source order
};

/// Parses `text` (named `file` in diagnostics) and checks it. Broken YAML gives one diagnostic
/// at the parser's position and an empty part. Appends to `diagnostics`; never throws.
FilePart DecodeFile(const std::string& file, const std::string& text,
                    std::vector<Diagnostic>* diagnostics);

}  // namespace berth::manifests
