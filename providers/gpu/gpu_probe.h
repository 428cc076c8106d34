// GPUs as the driver sees them: devices, memory, and the compute processes using them, each
// attributed to the systemd unit that owns it. Two real probes: NVML opened at run time (no
// build dependency on NVIDIA packages), and nvidia-smi as a fallback when the library cannot be
// loaded. ObserveGpus picks the best one available and never fails: what it could not see, it
// says in words.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/observed.h"
#include "core/status.h"

namespace berth {

class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  /// Devices with memory and compute processes; processes mapped to units. Memory in bytes;
  /// memory_used counts what the driver reserves, so memory_total - memory_used is what a new
  /// process can still allocate. An error Status says what failed and what it means for the
  /// operator ("...; GPU memory checks are skipped").
  virtual Result<std::vector<ObservedGpu>> Observe() = 0;
  /// Remarks on the last Observe() worth showing an operator: values the driver did not report
  /// (a process whose memory is unknown is listed with 0 bytes and a note). Empty by default.
  virtual std::vector<std::string> notes() const { return {}; }
};

struct GpuProbeOptions {
  /// Name or path handed to dlopen. Default: "libnvidia-ml.so.1" (the loader's search path).
  std::string nvml_library = "libnvidia-ml.so.1";
  /// nvidia-smi to run when NVML cannot be loaded. Default "": search $PATH for "nvidia-smi".
  std::string nvidia_smi;
  /// Seconds nvidia-smi may take for one query before it is killed. Default 10.
  int nvidia_smi_timeout_s = 10;
  /// Where PID/cgroup and PID/comm are read to name each process and its unit. Default "/proc".
  std::string proc_root = "/proc";
};

/// NVML, loaded with dlopen(RTLD_NOW | RTLD_LOCAL). NotFound when the library cannot be loaded
/// or lacks an entry point berth needs (the message carries dlerror()). Loading does not touch
/// the driver: nvmlInit_v2 and nvmlShutdown bracket every Observe().
Result<std::unique_ptr<GpuProbe>> OpenNvmlProbe(const GpuProbeOptions& options);

/// nvidia-smi's CSV queries, run without a shell under a timeout. NotFound when nvidia-smi is
/// not found or not executable.
Result<std::unique_ptr<GpuProbe>> OpenNvidiaSmiProbe(const GpuProbeOptions& options);

struct GpuObservation {
  bool known = false;              // false: nothing could be observed; `error` says why
  std::string error;               // for the operator; "" when known
  std::vector<ObservedGpu> gpus;   // by index; empty when !known
  std::string source;              // "nvml", "nvidia-smi", or "" when neither could be used
  std::vector<std::string> notes;  // remarks that do not make the observation unknown
};

/// The best observation available: NVML; if it cannot be loaded, nvidia-smi; if neither,
/// known=false with both reasons. NVML that loads but fails (driver not loaded, version
/// mismatch) is reported as is, without trying nvidia-smi (it uses the same NVML).
GpuObservation ObserveGpus(const GpuProbeOptions& options);

/// Copies an observation into the GPU section of `observed` (gpus_known, gpu_error, gpus) and
/// its notes into observed->warnings ("GPU: ...").
void ApplyGpuObservation(const GpuObservation& observation, Observed* observed);

}  // namespace berth
