// berth_gpu_observe: prints what berth's GPU probes see, as JSON, for check_gpu.sh on a real GPU
// machine. Depends only on berth_core, the gpu and host providers and libc, so a binary built on
// Debian 12 runs as is on Ubuntu 24.04.
//
//   berth_gpu_observe [--library NAME_OR_PATH] [--nvidia-smi PATH] [--proc-root DIR]
//
// Output: {"source": "nvml", "notes": [...], "gpus": {"known": true, "error": "", "devices":
// [...]}} where "gpus" has the shape of the "gpus" section of `berth observe -o json`.
// Exit status: 0 when the GPUs are known, 1 when not, 2 on a usage error.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "providers/gpu/gpu_probe.h"

namespace {

nlohmann::ordered_json ToJson(const berth::GpuObservation& o) {
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const berth::ObservedGpu& g : o.gpus) {
    nlohmann::ordered_json processes = nlohmann::ordered_json::array();
    for (const berth::GpuProcess& p : g.processes) {
      processes.push_back(
          {{"pid", p.pid}, {"used_bytes", p.used_bytes}, {"unit", p.unit}, {"name", p.name}});
    }
    devices.push_back({{"index", g.index},
                       {"uuid", g.uuid},
                       {"name", g.name},
                       {"memory_total", g.memory_total},
                       {"memory_used", g.memory_used},
                       {"processes", std::move(processes)}});
  }
  nlohmann::ordered_json j;
  j["source"] = o.source;
  j["notes"] = o.notes;
  j["gpus"] = {{"known", o.known}, {"error", o.error}, {"devices", std::move(devices)}};
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  berth::GpuProbeOptions options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 < argc && arg == "--library") {
      options.nvml_library = argv[++i];
    } else if (i + 1 < argc && arg == "--nvidia-smi") {
      options.nvidia_smi = argv[++i];
    } else if (i + 1 < argc && arg == "--proc-root") {
      options.proc_root = argv[++i];
    } else {
      std::cerr << "usage: " << argv[0]
                << " [--library NAME_OR_PATH] [--nvidia-smi PATH] [--proc-root DIR]\n";
      return 2;
    }
  }
  berth::GpuObservation o = berth::ObserveGpus(options);
  std::cout << ToJson(o).dump(2) << "\n";
  return o.known ? 0 : 1;
}
