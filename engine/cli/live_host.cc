#include "engine/cli/live_host.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "core/hf_cache.h"
#include "engine/observe/live_observer.h"
#include "providers/front/haproxy_live.h"
#include "providers/gpu/gpu_probe.h"
#include "providers/host/page_cache.h"
#include "providers/systemd/sdbus_manager.h"

namespace berth {

Result<HostSeams> LiveHost::Connect(const Desired& desired) {
  HostSeams seams;
  journal_ = std::make_unique<SdJournalReader>(access_.journal_dir);
  unit_files_ = std::make_unique<UnitFileStore>(desired.host.unit_dir);
  SdBusOptions bus;
  bus.address = access_.bus_address;
  bus.journal = journal_.get();
  auto mgr = ConnectSystemd(bus);
  systemd_.reset();
  if (mgr.ok())
    systemd_ = std::move(mgr).value();
  else
    seams.systemd_error = mgr.status().message();

  LiveObserverOptions o;
  o.systemd = systemd_.get();
  o.systemd_error = seams.systemd_error;
  o.unit_files = unit_files_.get();
  o.hub = HubOptionsFromEnvironment();
  o.gpu.nvml_library = access_.nvml_library;
  o.standby = &standby_;
  observer_ = std::make_unique<LiveObserver>(o);
  health_ = std::make_unique<CurlHealthProbe>();
  models_ = std::make_unique<HubModelStore>(
      desired.host.store.empty() ? DefaultStorePath() : desired.host.store,
      HubOptionsFromEnvironment(), desired.host.reserve_bytes);

  seams.observer = observer_.get();
  seams.systemd = systemd_.get();
  seams.unit_files = unit_files_.get();
  seams.health = health_.get();
  seams.smoke = &smoke_;
  seams.load = [](const LoadSpec& spec, const std::atomic<bool>* stop) {
    return RunLoad(spec, stop);
  };
  seams.prewarm = [](const PrewarmStep& step,
                     const std::function<void(uint64_t, uint64_t)>& progress,
                     const std::atomic<bool>* stop) -> Result<uint64_t> {
    auto files = PrewarmFiles(step.snapshot, step.file);
    if (!files.ok()) return files.status();
    PrewarmOptions options;
    options.stop = stop;
    options.progress = progress;
    // A minute, plus what a slow disk (50 MB/s) takes for what the plan counted.
    options.deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60) +
                       std::chrono::seconds(step.bytes / 50'000'000);
    return Prewarm(*files, options);
  };
  seams.standby = &standby_;
  // A sleep's check that it freed its GPU memory: NVML asked afresh, the unit's processes
  // summed per GPU.
  GpuProbeOptions gpu;
  gpu.nvml_library = access_.nvml_library;
  seams.gpu_held = [gpu](const std::string& unit) -> Result<std::map<int, uint64_t>> {
    GpuObservation seen = ObserveGpus(gpu);
    if (!seen.known) return Status::Unavailable("GPUs not observed: " + seen.error);
    std::map<int, uint64_t> held;
    for (const ObservedGpu& g : seen.gpus)
      for (const GpuProcess& p : g.processes)
        if (p.unit == unit) held[g.index] += p.used_bytes;
    return held;
  };
  seams.connect_front = ConnectHaproxy;
  seams.reload_front = [](const std::string& master, const std::string& admin, Clock& clock) {
    return ReloadHaproxy(master, admin, clock);
  };
  seams.commands = &commands_;
  seams.models = models_.get();
  seams.journal = journal_.get();
  return seams;
}

std::string LocalHostname() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

std::string FindEngineCheckDir() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "";
  std::string exe(self, static_cast<size_t>(n));
  std::string dir = exe.substr(0, exe.rfind('/'));
  for (const std::string& candidate :
       {dir + "/engine-check", dir + "/../libexec/berth/engine-check"}) {
    char real[PATH_MAX];
    if (!::realpath(candidate.c_str(), real)) continue;
    struct stat st {};
    if (::stat((std::string(real) + "/vllm_check.py").c_str(), &st) == 0 && S_ISREG(st.st_mode))
      return real;
  }
  return "";
}

std::optional<std::string> BerthExecutable() {
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return std::nullopt;
  std::string exe(self, static_cast<size_t>(n));
  if (exe.substr(exe.rfind('/') + 1) != "berth") return std::nullopt;
  return exe;
}

ReconcilerDeps LiveReconcilerDeps(LiveHost* host, Reporter* reporter, Clock* clock) {
  ReconcilerDeps d;
  d.engine_check_dir = FindEngineCheckDir();
  d.berth_executable = BerthExecutable();
  d.connect = [host](const Desired& desired) { return host->Connect(desired); };
  d.hostname = LocalHostname;
  d.connect_etcd = ConnectFleetEtcd;
  d.clock = clock;
  d.reporter = reporter;
  return d;
}

}  // namespace berth
