// The NVML probe: libnvidia-ml.so.1 opened with dlopen, so berth runs (and plans offline) on
// hosts without a driver. The only place that calls NVML.
#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "providers/gpu/attribution.h"
#include "providers/gpu/gpu_probe.h"
#include "providers/gpu/nvml_api.h"

namespace berth {
namespace {

constexpr char kSkipped[] = "; GPU memory checks are skipped";

/// What an NVML error means for the operator, beyond NVML's own words.
std::string Hint(nvml::Return code) {
  switch (code) {
    case nvml::kErrorDriverNotLoaded:
      return " (the nvidia kernel module is not loaded)";
    case nvml::kErrorLibRmVersionMismatch:
      return " (libnvidia-ml and the kernel module are different driver versions: was the driver "
             "upgraded without a reboot?)";
    case nvml::kErrorNoPermission:
      return " (no permission to open /dev/nvidia*)";
    case nvml::kErrorGpuIsLost:
      return " (a GPU fell off the bus or stopped responding)";
    default:
      return "";
  }
}

class NvmlProbe : public GpuProbe {
 public:
  NvmlProbe(void* handle, GpuProbeOptions options) : handle_(handle), opt_(std::move(options)) {}
  ~NvmlProbe() override { dlclose(handle_); }
  NvmlProbe(const NvmlProbe&) = delete;
  NvmlProbe& operator=(const NvmlProbe&) = delete;

  /// Resolves the entry points; "" when all required ones are there, else the missing name.
  std::string Resolve() {
    Sym("nvmlInit_v2", &init_);
    Sym("nvmlShutdown", &shutdown_);
    Sym("nvmlErrorString", &error_string_);
    Sym("nvmlDeviceGetCount_v2", &get_count_);
    Sym("nvmlDeviceGetHandleByIndex_v2", &get_handle_);
    Sym("nvmlDeviceGetUUID", &get_uuid_);
    Sym("nvmlDeviceGetName", &get_name_);
    Sym("nvmlDeviceGetMemoryInfo", &get_memory_);
    Sym("nvmlDeviceGetMemoryInfo_v2", &get_memory_v2_);
    Sym("nvmlDeviceGetComputeRunningProcesses_v3", &get_processes_v3_);
    Sym("nvmlDeviceGetComputeRunningProcesses_v2", &get_processes_v2_);
    Sym("nvmlDeviceGetComputeRunningProcesses", &get_processes_v1_);
    if (!init_) return "nvmlInit_v2";
    if (!shutdown_) return "nvmlShutdown";
    if (!get_count_) return "nvmlDeviceGetCount_v2";
    if (!get_handle_) return "nvmlDeviceGetHandleByIndex_v2";
    if (!get_uuid_) return "nvmlDeviceGetUUID";
    if (!get_name_) return "nvmlDeviceGetName";
    if (!get_memory_ && !get_memory_v2_) return "nvmlDeviceGetMemoryInfo";
    if (!get_processes_v3_ && !get_processes_v2_ && !get_processes_v1_) {
      return "nvmlDeviceGetComputeRunningProcesses";
    }
    return "";
  }

  Result<std::vector<ObservedGpu>> Observe() override {
    notes_.clear();
    nvml::Return rc = init_();
    if (rc != nvml::kSuccess) {
      return Status::Unavailable("NVML could not be initialized: " + Text(rc) + Hint(rc) +
                                 kSkipped);
    }
    Result<std::vector<ObservedGpu>> gpus = ObserveInitialized();
    shutdown_();
    if (gpus.ok()) AttributeProcesses(opt_.proc_root, &gpus.value());
    return gpus;
  }

  std::vector<std::string> notes() const override { return notes_; }

 private:
  template <typename Fn>
  void Sym(const char* name, Fn* fn) {
    *fn = reinterpret_cast<Fn>(dlsym(handle_, name));
  }

  std::string Text(nvml::Return rc) const {
    const char* s = error_string_ ? error_string_(rc) : nullptr;
    return s && *s ? std::string(s) : "NVML error " + std::to_string(rc);
  }

  Status Failed(const std::string& what, nvml::Return rc) const {
    return Status::Unavailable("NVML " + what + " failed: " + Text(rc) + Hint(rc) + kSkipped);
  }

  Result<std::vector<ObservedGpu>> ObserveInitialized() {
    unsigned int count = 0;
    nvml::Return rc = get_count_(&count);
    if (rc != nvml::kSuccess) return Failed("nvmlDeviceGetCount_v2", rc);
    std::vector<ObservedGpu> gpus;
    for (unsigned int i = 0; i < count; ++i) {
      Result<ObservedGpu> gpu = ObserveDevice(i);
      if (!gpu.ok()) return gpu.status();
      gpus.push_back(std::move(gpu).value());
    }
    return gpus;
  }

  Result<ObservedGpu> ObserveDevice(unsigned int index) {
    std::string where = " of GPU " + std::to_string(index);
    nvml::Device dev = nullptr;
    nvml::Return rc = get_handle_(index, &dev);
    if (rc != nvml::kSuccess) return Failed("nvmlDeviceGetHandleByIndex_v2" + where, rc);
    ObservedGpu gpu;
    gpu.index = static_cast<int>(index);
    char buf[nvml::kUuidBufferSize > nvml::kNameBufferSize ? nvml::kUuidBufferSize
                                                           : nvml::kNameBufferSize] = {};
    rc = get_uuid_(dev, buf, nvml::kUuidBufferSize);
    if (rc != nvml::kSuccess) return Failed("nvmlDeviceGetUUID" + where, rc);
    gpu.uuid = buf;
    buf[0] = '\0';
    rc = get_name_(dev, buf, nvml::kNameBufferSize);
    if (rc != nvml::kSuccess) return Failed("nvmlDeviceGetName" + where, rc);
    gpu.name = buf;
    BERTH_RETURN_IF_ERROR(ReadMemory(dev, where, &gpu));
    BERTH_RETURN_IF_ERROR(ReadProcesses(dev, where, &gpu));
    return gpu;
  }

  /// memory_used is total - free under both calls: the driver's reservation cannot be allocated
  /// by anyone, so for a feasibility check it is used.
  Status ReadMemory(nvml::Device dev, const std::string& where, ObservedGpu* gpu) {
    if (get_memory_v2_) {
      nvml::MemoryV2 m{};
      m.version = nvml::kMemoryV2Version;
      nvml::Return rc = get_memory_v2_(dev, &m);
      if (rc == nvml::kSuccess) {
        gpu->memory_total = m.total;
        gpu->memory_used = m.total >= m.free ? m.total - m.free : m.used + m.reserved;
        return Status::Ok();
      }
      if (!get_memory_) return Failed("nvmlDeviceGetMemoryInfo_v2" + where, rc);
    }
    nvml::Memory m{};
    nvml::Return rc = get_memory_(dev, &m);
    if (rc != nvml::kSuccess) return Failed("nvmlDeviceGetMemoryInfo" + where, rc);
    gpu->memory_total = m.total;
    gpu->memory_used = m.total >= m.free ? m.total - m.free : m.used;
    return Status::Ok();
  }

  /// Calls `fn` with a buffer that grows until the driver's list fits (processes come and go
  /// between calls, so the count it returns is a hint, not a promise).
  template <typename Info, typename Fn>
  static nvml::Return List(Fn fn, nvml::Device dev, std::vector<Info>* infos) {
    infos->resize(32);
    nvml::Return rc = nvml::kErrorInsufficientSize;
    for (int attempt = 0; attempt < 8 && rc == nvml::kErrorInsufficientSize; ++attempt) {
      auto n = static_cast<unsigned int>(infos->size());
      rc = fn(dev, &n, infos->data());
      if (rc == nvml::kSuccess) infos->resize(n);
      if (rc == nvml::kErrorInsufficientSize)
        infos->resize(std::max<size_t>(n, infos->size()) + 16);
    }
    return rc;
  }

  template <typename Info>
  void AddProcesses(const std::vector<Info>& infos, const std::string& where, ObservedGpu* gpu) {
    for (const Info& info : infos) {
      GpuProcess p;
      p.pid = static_cast<int>(info.pid);
      if (info.usedGpuMemory == nvml::kValueNotAvailable) {
        notes_.push_back("the driver does not report the memory of process " +
                         std::to_string(info.pid) + where + "; counted as 0 bytes");
      } else {
        p.used_bytes = info.usedGpuMemory;
      }
      gpu->processes.push_back(std::move(p));
    }
  }

  Status ReadProcesses(nvml::Device dev, const std::string& where, ObservedGpu* gpu) {
    // Newest first; a call the driver says it lacks falls through to the older one.
    struct Versioned {
      nvml::GetProcessesV2Fn fn;
      const char* name;
    };
    for (const Versioned& v :
         {Versioned{get_processes_v3_, "nvmlDeviceGetComputeRunningProcesses_v3"},
          Versioned{get_processes_v2_, "nvmlDeviceGetComputeRunningProcesses_v2"}}) {
      if (!v.fn) continue;
      std::vector<nvml::ProcessInfoV2> infos;
      nvml::Return rc = List(v.fn, dev, &infos);
      if (rc == nvml::kErrorFunctionNotFound) continue;
      if (rc != nvml::kSuccess) return Failed(v.name + where, rc);
      AddProcesses(infos, where, gpu);
      return Status::Ok();
    }
    const std::string name = "nvmlDeviceGetComputeRunningProcesses";
    if (!get_processes_v1_) return Failed(name + where, nvml::kErrorFunctionNotFound);
    std::vector<nvml::ProcessInfoV1> infos;
    nvml::Return rc = List(get_processes_v1_, dev, &infos);
    if (rc != nvml::kSuccess) return Failed(name + where, rc);
    AddProcesses(infos, where, gpu);
    return Status::Ok();
  }

  void* handle_;
  GpuProbeOptions opt_;
  std::vector<std::string> notes_;
  nvml::InitFn init_ = nullptr;
  nvml::ShutdownFn shutdown_ = nullptr;
  nvml::ErrorStringFn error_string_ = nullptr;
  nvml::DeviceGetCountFn get_count_ = nullptr;
  nvml::DeviceGetHandleByIndexFn get_handle_ = nullptr;
  nvml::DeviceGetStringFn get_uuid_ = nullptr;
  nvml::DeviceGetStringFn get_name_ = nullptr;
  nvml::DeviceGetMemoryInfoFn get_memory_ = nullptr;
  nvml::DeviceGetMemoryInfoV2Fn get_memory_v2_ = nullptr;
  nvml::GetProcessesV2Fn get_processes_v3_ = nullptr;
  nvml::GetProcessesV2Fn get_processes_v2_ = nullptr;
  nvml::GetProcessesV1Fn get_processes_v1_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<GpuProbe>> OpenNvmlProbe(const GpuProbeOptions& options) {
  dlerror();
  void* handle = dlopen(options.nvml_library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    return Status::NotFound(options.nvml_library +
                            " not found (dlopen: " + (err ? err : "unknown error") + ")");
  }
  auto probe = std::make_unique<NvmlProbe>(handle, options);
  std::string missing = probe->Resolve();
  if (!missing.empty()) {
    return Status::NotFound(options.nvml_library + " lacks " + missing +
                            " (a driver too old for berth)");
  }
  return std::unique_ptr<GpuProbe>(std::move(probe));
}

}  // namespace berth
