#include "providers/gpu/gpu_probe.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/read_file.h"
#include "providers/gpu/attribution.h"
#include "providers/host/cgroup.h"

namespace berth {

std::string CommOfPid(int pid, const std::string& proc_root) {
  Result<std::string> comm =
      ReadRegularFile(proc_root + "/" + std::to_string(pid) + "/comm", {.max_bytes = 4096});
  if (!comm.ok()) return "";
  return comm->substr(0, comm->find('\n'));
}

void AttributeProcesses(const std::string& proc_root, std::vector<ObservedGpu>* gpus) {
  for (ObservedGpu& gpu : *gpus) {
    for (GpuProcess& p : gpu.processes) {
      p.unit = UnitOfPid(p.pid, proc_root);
      std::string comm = CommOfPid(p.pid, proc_root);
      if (!comm.empty()) p.name = std::move(comm);
    }
  }
}

namespace {

void Run(GpuProbe& probe, const std::string& source, GpuObservation* out) {
  out->source = source;
  Result<std::vector<ObservedGpu>> gpus = probe.Observe();
  std::vector<std::string> notes = probe.notes();
  out->notes.insert(out->notes.end(), notes.begin(), notes.end());
  if (!gpus.ok()) {
    out->known = false;
    out->error = gpus.status().message();
    return;
  }
  out->known = true;
  out->gpus = std::move(gpus).value();
  std::sort(out->gpus.begin(), out->gpus.end(),
            [](const ObservedGpu& a, const ObservedGpu& b) { return a.index < b.index; });
}

}  // namespace

GpuObservation ObserveGpus(const GpuProbeOptions& options) {
  GpuObservation out;
  Result<std::unique_ptr<GpuProbe>> nvml = OpenNvmlProbe(options);
  if (nvml.ok()) {
    Run(**nvml, "nvml", &out);
    return out;
  }
  Result<std::unique_ptr<GpuProbe>> smi = OpenNvidiaSmiProbe(options);
  if (smi.ok()) {
    out.notes.push_back(nvml.status().message() + "; used nvidia-smi instead");
    Run(**smi, "nvidia-smi", &out);
    return out;
  }
  out.known = false;
  out.error = "no NVIDIA driver: " + nvml.status().message() + ", " + smi.status().message() +
              "; the plan uses the GPU inventory from the manifest or a saved observation";
  return out;
}

void ApplyGpuObservation(const GpuObservation& observation, Observed* observed) {
  observed->gpus_known = observation.known;
  observed->gpu_error = observation.error;
  observed->gpus = observation.gpus;
  for (const std::string& note : observation.notes) observed->warnings.push_back("GPU: " + note);
}

}  // namespace berth
