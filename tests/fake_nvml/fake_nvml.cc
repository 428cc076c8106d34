// A fake libnvidia-ml.so.1: the NVML entry points berth uses, answering from a text file named
// by $FAKE_NVML_CONFIG (read at every nvmlInit_v2), so tests exercise berth's real dlopen path.
// Built twice: the full library, and with FAKE_NVML_OLD_DRIVER an older driver's that lacks
// nvmlDeviceGetComputeRunningProcesses_v2/_v3 and nvmlDeviceGetMemoryInfo_v2.
//
// Config lines (fields separated by spaces; '#' starts a comment line):
//   init_error CODE                          nvmlInit_v2 returns CODE (e.g. 9: driver not loaded)
//   device INDEX UUID TOTAL USED RESERVED NAME...   bytes; USED includes RESERVED (as nvmlMemory_t)
//   process INDEX PID BYTES|na               a compute process on device INDEX; na: not available
// With $FAKE_NVML_CLAIMS_DIR set, every regular file in that folder is read too, for its
// `process` lines alone (the fake vLLM writes one per server: what it holds on which GPU, 0 while
// it sleeps); a claim adds its bytes to the device's used memory, and the claim of a process that
// no longer runs is left out, as the driver does. A claim's PID is its writer's own: one written in
// a sandbox's PID namespace is reported as the host PID of that process (HostPid), as the driver
// reports it.
// With $FAKE_NVML_LOG set, every call appends its function name to that file.
#include <dirent.h>
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "providers/gpu/nvml_api.h"

namespace nvml = berth::nvml;

struct FakeProcess {
  unsigned int pid = 0;
  unsigned long long used = 0;  // NOLINT(runtime/int)
};

namespace berth::nvml {
struct DeviceSt {
  std::string uuid;
  std::string name;
  unsigned long long total = 0;     // NOLINT(runtime/int)
  unsigned long long used = 0;      // NOLINT(runtime/int)
  unsigned long long reserved = 0;  // NOLINT(runtime/int)
  std::vector<FakeProcess> processes;
};
}  // namespace berth::nvml

namespace {

struct World {
  int init_count = 0;
  nvml::Return init_error = nvml::kSuccess;
  std::vector<nvml::DeviceSt> devices;
};

World& TheWorld() {
  static World world;
  return world;
}

void Log(const char* call) {
  const char* path = std::getenv("FAKE_NVML_LOG");
  if (!path) return;
  std::ofstream(path, std::ios::app) << call << "\n";
}

// The `process` lines of the claim files in $FAKE_NVML_CLAIMS_DIR (see the top).
// Whether process `pid` (a host PID) runs with FAKE_NVML_CLAIMS_DIR=`dir`.
bool ClaimsInto(const std::string& pid, const std::string& dir) {
  std::ifstream in("/proc/" + pid + "/environ", std::ios::binary);
  std::string entry;
  while (std::getline(in, entry, '\0'))
    if (entry == "FAKE_NVML_CLAIMS_DIR=" + dir) return true;
  return false;
}

// The host PID of a claim's writer. A fake vLLM writes its own PID, which under a sandboxed
// systemd is one of the sandbox's PID namespace: the real driver reports host PIDs. The process
// whose innermost PID (the last of /proc/N/status's NSpid) is `pid` and whose environment names
// this claims folder; else `pid` itself (a server run here, with no namespace; or a test that
// set the variable after it started, which /proc/N/environ does not show).
unsigned int HostPid(unsigned int pid, const std::string& dir) {
  if (ClaimsInto(std::to_string(pid), dir)) return pid;
  DIR* proc = ::opendir("/proc");
  if (!proc) return 0;
  unsigned int found = 0;
  while (dirent* e = ::readdir(proc)) {
    std::string n = e->d_name;
    if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status("/proc/" + n + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("NSpid:", 0) != 0) continue;
      std::istringstream ids(line.substr(6));
      std::vector<unsigned long> all;  // NOLINT(runtime/int)
      unsigned long id = 0;            // NOLINT(runtime/int)
      while (ids >> id) all.push_back(id);
      if (all.size() >= 2 && all.back() == pid && ClaimsInto(n, dir))
        found = static_cast<unsigned int>(std::stoul(n));
      break;
    }
    if (found) break;
  }
  ::closedir(proc);
  return found ? found : pid;
}

void LoadClaims(World* w) {
  const char* dir = std::getenv("FAKE_NVML_CLAIMS_DIR");
  DIR* d = dir ? ::opendir(dir) : nullptr;
  if (!d) return;
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  ::closedir(d);
  for (const std::string& name : names) {
    std::ifstream in(std::string(dir) + "/" + name);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string key;
      size_t index = 0;
      FakeProcess p;
      if (!(ls >> key >> index >> p.pid >> p.used) || key != "process") continue;
      p.pid = HostPid(p.pid, dir);
      if (::kill(static_cast<pid_t>(p.pid), 0) != 0 && errno == ESRCH) continue;
      if (w->devices.size() <= index) continue;  // a GPU this host does not have
      w->devices[index].processes.push_back(p);
      w->devices[index].used += p.used;
    }
  }
}

nvml::Return Load(World* w) {
  w->init_error = nvml::kSuccess;
  w->devices.clear();
  const char* path = std::getenv("FAKE_NVML_CONFIG");
  if (!path) return nvml::kSuccess;
  std::ifstream in(path);
  if (!in) return nvml::kErrorUnknown;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    if (!(ls >> key) || key[0] == '#') continue;
    if (key == "init_error") {
      ls >> w->init_error;
    } else if (key == "device") {
      size_t index = 0;
      nvml::DeviceSt d;
      ls >> index >> d.uuid >> d.total >> d.used >> d.reserved;
      std::getline(ls >> std::ws, d.name);
      if (w->devices.size() <= index) w->devices.resize(index + 1);
      d.processes = std::move(w->devices[index].processes);
      w->devices[index] = std::move(d);
    } else if (key == "process") {
      size_t index = 0;
      FakeProcess p;
      std::string used;
      ls >> index >> p.pid >> used;
      p.used = used == "na" ? nvml::kValueNotAvailable : std::strtoull(used.c_str(), nullptr, 10);
      if (w->devices.size() <= index) w->devices.resize(index + 1);
      w->devices[index].processes.push_back(p);
    } else {
      return nvml::kErrorUnknown;
    }
  }
  LoadClaims(w);
  return nvml::kSuccess;
}

nvml::Return CopyString(const std::string& s, char* buf, unsigned int size) {
  if (!buf) return nvml::kErrorInvalidArgument;
  if (s.size() + 1 > size) return nvml::kErrorInsufficientSize;
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return nvml::kSuccess;
}

nvml::Return Check(nvml::Device dev) {
  if (TheWorld().init_count == 0) return nvml::kErrorUninitialized;
  return dev ? nvml::kSuccess : nvml::kErrorInvalidArgument;
}

template <typename Info>
nvml::Return Processes(nvml::Device dev, unsigned int* count, Info* infos) {
  nvml::Return rc = Check(dev);
  if (rc != nvml::kSuccess) return rc;
  if (!count) return nvml::kErrorInvalidArgument;
  auto n = static_cast<unsigned int>(dev->processes.size());
  if (*count < n) {
    *count = n;
    return nvml::kErrorInsufficientSize;
  }
  *count = n;
  for (unsigned int i = 0; i < n; ++i) {
    Info info{};
    info.pid = dev->processes[i].pid;
    info.usedGpuMemory = dev->processes[i].used;
    infos[i] = info;
  }
  return nvml::kSuccess;
}

[[maybe_unused]] nvml::Return ProcessesV2(nvml::Device dev, unsigned int* count,
                                          nvml::ProcessInfoV2* infos) {
  nvml::Return rc = Processes(dev, count, infos);
  for (unsigned int i = 0; rc == nvml::kSuccess && i < *count; ++i) {
    infos[i].gpuInstanceId = 0xFFFFFFFFU;
    infos[i].computeInstanceId = 0xFFFFFFFFU;
  }
  return rc;
}

}  // namespace

extern "C" {

nvml::Return nvmlInit_v2() {
  Log("nvmlInit_v2");
  World& w = TheWorld();
  nvml::Return rc = Load(&w);
  if (rc == nvml::kSuccess) rc = w.init_error;
  if (rc == nvml::kSuccess) ++w.init_count;
  return rc;
}

nvml::Return nvmlShutdown() {
  Log("nvmlShutdown");
  World& w = TheWorld();
  if (w.init_count == 0) return nvml::kErrorUninitialized;
  --w.init_count;
  return nvml::kSuccess;
}

const char* nvmlErrorString(nvml::Return rc) {
  switch (rc) {
    case nvml::kSuccess:
      return "Success";
    case nvml::kErrorUninitialized:
      return "Uninitialized";
    case nvml::kErrorInvalidArgument:
      return "Invalid Argument";
    case nvml::kErrorNotSupported:
      return "Not Supported";
    case nvml::kErrorNoPermission:
      return "Insufficient Permissions";
    case nvml::kErrorNotFound:
      return "Not Found";
    case nvml::kErrorInsufficientSize:
      return "Insufficient Size";
    case nvml::kErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case nvml::kErrorFunctionNotFound:
      return "Function Not Found";
    case nvml::kErrorGpuIsLost:
      return "GPU is lost";
    case nvml::kErrorLibRmVersionMismatch:
      return "RM has detected an NVML/RM version mismatch.";
    case nvml::kErrorArgumentVersionMismatch:
      return "Argument version mismatch";
    default:
      return "Unknown Error";
  }
}

nvml::Return nvmlDeviceGetCount_v2(unsigned int* count) {
  if (TheWorld().init_count == 0) return nvml::kErrorUninitialized;
  if (!count) return nvml::kErrorInvalidArgument;
  *count = static_cast<unsigned int>(TheWorld().devices.size());
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvml::Device* dev) {
  World& w = TheWorld();
  if (w.init_count == 0) return nvml::kErrorUninitialized;
  if (!dev || index >= w.devices.size()) return nvml::kErrorInvalidArgument;
  *dev = &w.devices[index];
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetUUID(nvml::Device dev, char* buf, unsigned int size) {
  nvml::Return rc = Check(dev);
  return rc == nvml::kSuccess ? CopyString(dev->uuid, buf, size) : rc;
}

nvml::Return nvmlDeviceGetName(nvml::Device dev, char* buf, unsigned int size) {
  nvml::Return rc = Check(dev);
  return rc == nvml::kSuccess ? CopyString(dev->name, buf, size) : rc;
}

nvml::Return nvmlDeviceGetMemoryInfo(nvml::Device dev, nvml::Memory* m) {
  Log("nvmlDeviceGetMemoryInfo");
  nvml::Return rc = Check(dev);
  if (rc != nvml::kSuccess) return rc;
  if (!m) return nvml::kErrorInvalidArgument;
  m->total = dev->total;
  m->used = dev->used;
  m->free = dev->total - dev->used;
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetComputeRunningProcesses(nvml::Device dev, unsigned int* count,
                                                  nvml::ProcessInfoV1* infos) {
  Log("nvmlDeviceGetComputeRunningProcesses");
  return Processes(dev, count, infos);
}

#ifndef FAKE_NVML_OLD_DRIVER
nvml::Return nvmlDeviceGetMemoryInfo_v2(nvml::Device dev, nvml::MemoryV2* m) {
  Log("nvmlDeviceGetMemoryInfo_v2");
  nvml::Return rc = Check(dev);
  if (rc != nvml::kSuccess) return rc;
  if (!m) return nvml::kErrorInvalidArgument;
  if (m->version != nvml::kMemoryV2Version) return nvml::kErrorArgumentVersionMismatch;
  m->total = dev->total;
  m->reserved = dev->reserved;
  m->free = dev->total - dev->used;
  m->used = dev->used - dev->reserved;
  return nvml::kSuccess;
}

nvml::Return nvmlDeviceGetComputeRunningProcesses_v2(nvml::Device dev, unsigned int* count,
                                                     nvml::ProcessInfoV2* infos) {
  Log("nvmlDeviceGetComputeRunningProcesses_v2");
  return ProcessesV2(dev, count, infos);
}

nvml::Return nvmlDeviceGetComputeRunningProcesses_v3(nvml::Device dev, unsigned int* count,
                                                     nvml::ProcessInfoV2* infos) {
  Log("nvmlDeviceGetComputeRunningProcesses_v3");
  return ProcessesV2(dev, count, infos);
}
#endif

}  // extern "C"
