// The GPU probes against a fake libnvidia-ml.so.1 loaded through the real dlopen path, and a
// fake nvidia-smi run as a real process. Processes are named and attributed to units from a fake
// /proc written by each test.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "providers/gpu/gpu_probe.h"
#include "tests/providers/temp_dir.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;
// An H200 as NVML reports it on the GPU test machine (reference/gpu-machine.md).
constexpr uint64_t kH200Total = 150754820096;

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

int Count(const std::vector<std::string>& lines, const std::string& line) {
  int n = 0;
  for (const std::string& l : lines) n += l == line;
  return n;
}

class GpuProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* var : {"FAKE_NVML_CONFIG", "FAKE_NVML_LOG", "FAKE_SMI_GPUS", "FAKE_SMI_APPS",
                            "FAKE_SMI_MODE", "FAKE_SMI_ARGS", "FAKE_NVML_CLAIMS_DIR"}) {
      unsetenv(var);
    }
    setenv("FAKE_NVML_CONFIG", (dir_ / "nvml.conf").c_str(), 1);
    setenv("FAKE_NVML_LOG", (dir_ / "nvml.log").c_str(), 1);
    setenv("FAKE_SMI_GPUS", (dir_ / "smi-gpus.csv").c_str(), 1);
    setenv("FAKE_SMI_APPS", (dir_ / "smi-apps.csv").c_str(), 1);
    setenv("FAKE_SMI_ARGS", (dir_ / "smi-args.log").c_str(), 1);
    options_.nvml_library = FAKE_NVML_FULL;
    options_.nvidia_smi = FAKE_NVIDIA_SMI;
    options_.proc_root = dir_ / "proc";
    // A vLLM service's worker, a process in a login session, and one that already exited.
    Process(435, "python3", "0::/system.slice/vllm-kimi-k25.service\n");
    Process(436, "python3", "0::/user.slice/user-1000.slice/session-3.scope\n");
  }

  void Process(int pid, const std::string& comm, const std::string& cgroup) {
    dir_.Write("proc/" + std::to_string(pid) + "/comm", comm + "\n");
    dir_.Write("proc/" + std::to_string(pid) + "/cgroup", cgroup);
  }
  void Nvml(const std::string& config) { dir_.Write("nvml.conf", config); }
  std::vector<std::string> NvmlCalls() const { return Lines(dir_ / "nvml.log"); }

  /// Two H200s: the kimi worker and a notebook on GPU 0, a process gone from /proc on GPU 1.
  static std::string TwoGpus() {
    return "device 0 GPU-aaaa-0000 150754820096 80000000000 536870912 NVIDIA H200\n"
           "device 1 GPU-bbbb-1111 150754820096 1073741824 536870912 NVIDIA H200\n"
           "process 0 435 79137391616\n"
           "process 0 436 300000000\n"
           "process 1 999 1048576\n";
  }

  testing::TempDir dir_;
  GpuProbeOptions options_;
};

TEST_F(GpuProbeTest, NvmlSeesEveryDeviceAndAttributesProcessesToUnits) {
  Nvml(TwoGpus());
  GpuObservation o = ObserveGpus(options_);

  ASSERT_TRUE(o.known) << o.error;
  EXPECT_EQ(o.source, "nvml");
  EXPECT_THAT(o.notes, IsEmpty());
  ASSERT_EQ(o.gpus.size(), 2u);
  const ObservedGpu& g0 = o.gpus[0];
  EXPECT_EQ(g0.index, 0);
  EXPECT_EQ(g0.uuid, "GPU-aaaa-0000");
  EXPECT_EQ(g0.name, "NVIDIA H200");
  EXPECT_EQ(g0.memory_total, kH200Total);
  // Read through nvmlDeviceGetMemoryInfo_v2: the driver's reservation still counts as used.
  EXPECT_EQ(g0.memory_used, 80000000000u);
  ASSERT_EQ(g0.processes.size(), 2u);
  EXPECT_EQ(g0.processes[0].pid, 435);
  EXPECT_EQ(g0.processes[0].used_bytes, 79137391616u);
  EXPECT_EQ(g0.processes[0].unit, "vllm-kimi-k25.service");
  EXPECT_EQ(g0.processes[0].name, "python3");
  EXPECT_EQ(g0.processes[1].pid, 436);
  EXPECT_EQ(g0.processes[1].unit, "");  // a session scope is not a service
  EXPECT_EQ(g0.processes[1].name, "python3");
  const ObservedGpu& g1 = o.gpus[1];
  EXPECT_EQ(g1.uuid, "GPU-bbbb-1111");
  EXPECT_EQ(g1.memory_used, 1073741824u);
  ASSERT_EQ(g1.processes.size(), 1u);
  EXPECT_EQ(g1.processes[0].pid, 999);
  EXPECT_EQ(g1.processes[0].used_bytes, kMiB);
  EXPECT_EQ(g1.processes[0].unit, "");  // gone from /proc: nothing to attribute
  EXPECT_EQ(g1.processes[0].name, "");

  std::vector<std::string> calls = NvmlCalls();
  EXPECT_EQ(Count(calls, "nvmlInit_v2"), 1);
  EXPECT_EQ(Count(calls, "nvmlShutdown"), 1);  // every init is paired with a shutdown
  EXPECT_EQ(Count(calls, "nvmlDeviceGetMemoryInfo_v2"), 2);
  EXPECT_EQ(Count(calls, "nvmlDeviceGetMemoryInfo"), 0);  // v2's version word was accepted
  EXPECT_EQ(Count(calls, "nvmlDeviceGetComputeRunningProcesses_v3"), 2);
  EXPECT_EQ(Count(calls, "nvmlDeviceGetComputeRunningProcesses_v2"), 0);
  // NVML was there: nvidia-smi was never run.
  EXPECT_THAT(Lines(dir_ / "smi-args.log"), IsEmpty());
}

// The fake vLLM's claims (tests/fake_vllm: one file per server, rewritten when it sleeps or
// wakes): each live process's bytes are on its GPUs and in their used memory; the claim of a
// process that has exited, or on a GPU the host does not have, is not.
TEST_F(GpuProbeTest, TheFakeServersClaimsAddToTheirGpusAndAnExitedOnesDoNot) {
  Nvml(TwoGpus());
  setenv("FAKE_NVML_CLAIMS_DIR", (dir_ / "claims").c_str(), 1);
  const int me = static_cast<int>(::getpid());
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  dir_.Write("claims/fake-vllm-" + std::to_string(me),
             "process 0 " + std::to_string(me) + " 1000\nprocess 1 " + std::to_string(me) +
                 " 2000\nprocess 7 " + std::to_string(me) + " 5\n");
  dir_.Write("claims/fake-vllm-" + std::to_string(gone),
             "process 0 " + std::to_string(gone) + " 4000\n");
  GpuObservation o = ObserveGpus(options_);
  ASSERT_TRUE(o.known) << o.error;
  ASSERT_EQ(o.gpus.size(), 2u);
  ASSERT_EQ(o.gpus[0].processes.size(), 3u);
  EXPECT_EQ(o.gpus[0].processes[2].pid, me);
  EXPECT_EQ(o.gpus[0].processes[2].used_bytes, 1000u);
  EXPECT_EQ(o.gpus[0].memory_used, 80000000000u + 1000u);
  ASSERT_EQ(o.gpus[1].processes.size(), 2u);
  EXPECT_EQ(o.gpus[1].processes[1].used_bytes, 2000u);
  EXPECT_EQ(o.gpus[1].memory_used, 1073741824u + 2000u);

  // Asleep, the server's claim is 0: its GPUs are free again.
  dir_.Write("claims/fake-vllm-" + std::to_string(me),
             "process 0 " + std::to_string(me) + " 0\nprocess 1 " + std::to_string(me) + " 0\n");
  o = ObserveGpus(options_);
  ASSERT_TRUE(o.known) << o.error;
  EXPECT_EQ(o.gpus[0].memory_used, 80000000000u);
  EXPECT_EQ(o.gpus[1].memory_used, 1073741824u);
}

TEST_F(GpuProbeTest, NvmlProcessListLongerThanTheBufferIsReadWhole) {
  std::string config = "device 0 GPU-aaaa-0000 150754820096 80000000000 0 NVIDIA H200\n";
  for (int pid = 1000; pid < 1100; ++pid) {
    config += "process 0 " + std::to_string(pid) + " " + std::to_string(pid) + "\n";
  }
  Nvml(config);
  GpuObservation o = ObserveGpus(options_);

  ASSERT_TRUE(o.known) << o.error;
  ASSERT_EQ(o.gpus.size(), 1u);
  ASSERT_EQ(o.gpus[0].processes.size(), 100u);
  EXPECT_EQ(o.gpus[0].processes[99].pid, 1099);
  EXPECT_EQ(o.gpus[0].processes[99].used_bytes, 1099u);
  // The first call said "Insufficient Size" with the count; the second fit.
  EXPECT_EQ(Count(NvmlCalls(), "nvmlDeviceGetComputeRunningProcesses_v3"), 2);
}

TEST_F(GpuProbeTest, OlderDriverWithoutV2AndV3QueriesFallsBackToTheOriginalOnes) {
  Nvml(TwoGpus());
  options_.nvml_library = FAKE_NVML_OLD;
  GpuObservation o = ObserveGpus(options_);

  ASSERT_TRUE(o.known) << o.error;
  EXPECT_EQ(o.source, "nvml");
  ASSERT_EQ(o.gpus.size(), 2u);
  // The same world read through the v1 structs gives the same observation.
  EXPECT_EQ(o.gpus[0].memory_total, kH200Total);
  EXPECT_EQ(o.gpus[0].memory_used, 80000000000u);
  ASSERT_EQ(o.gpus[0].processes.size(), 2u);
  EXPECT_EQ(o.gpus[0].processes[0].pid, 435);
  EXPECT_EQ(o.gpus[0].processes[0].used_bytes, 79137391616u);
  EXPECT_EQ(o.gpus[0].processes[0].unit, "vllm-kimi-k25.service");
  EXPECT_EQ(o.gpus[0].processes[1].used_bytes, 300000000u);
  EXPECT_EQ(o.gpus[1].processes[0].pid, 999);

  std::vector<std::string> calls = NvmlCalls();
  EXPECT_EQ(Count(calls, "nvmlDeviceGetComputeRunningProcesses"), 2);
  EXPECT_EQ(Count(calls, "nvmlDeviceGetMemoryInfo"), 2);
  EXPECT_THAT(calls, Not(::testing::Contains("nvmlDeviceGetComputeRunningProcesses_v3")));
}

TEST_F(GpuProbeTest, ProcessMemoryTheDriverCannotReportCountsZeroWithANote) {
  Nvml(
      "device 0 GPU-aaaa-0000 150754820096 80000000000 0 NVIDIA H200\n"
      "process 0 435 na\n");
  GpuObservation o = ObserveGpus(options_);

  ASSERT_TRUE(o.known) << o.error;
  ASSERT_EQ(o.gpus[0].processes.size(), 1u);
  EXPECT_EQ(o.gpus[0].processes[0].used_bytes, 0u);
  EXPECT_EQ(o.gpus[0].processes[0].unit, "vllm-kimi-k25.service");
  EXPECT_THAT(o.notes,
              ElementsAre(HasSubstr("does not report the memory of process 435 of GPU 0")));
}

TEST_F(GpuProbeTest, DriverNotLoadedMakesGpusUnknownAndSaysWhatItMeans) {
  Nvml("init_error 9\n" + TwoGpus());
  GpuObservation o = ObserveGpus(options_);

  EXPECT_FALSE(o.known);
  EXPECT_EQ(o.source, "nvml");
  EXPECT_THAT(o.gpus, IsEmpty());
  EXPECT_THAT(o.error, HasSubstr("NVML could not be initialized: Driver Not Loaded"));
  EXPECT_THAT(o.error, HasSubstr("GPU memory checks are skipped"));
  EXPECT_THAT(NvmlCalls(), Not(::testing::Contains("nvmlShutdown")));  // init failed: none owed
  // nvidia-smi uses the same NVML: it is not asked.
  EXPECT_THAT(Lines(dir_ / "smi-args.log"), IsEmpty());

  Observed observed;
  ApplyGpuObservation(o, &observed);
  EXPECT_FALSE(observed.gpus_known);
  EXPECT_EQ(observed.gpu_error, o.error);
}

TEST_F(GpuProbeTest, NotesBecomeWarningsOfTheObservation) {
  Nvml(TwoGpus() + "process 1 1000 na\n");
  GpuObservation o = ObserveGpus(options_);
  ASSERT_TRUE(o.known) << o.error;
  Observed observed;
  ApplyGpuObservation(o, &observed);
  EXPECT_TRUE(observed.gpus_known);
  EXPECT_EQ(observed.gpus.size(), 2u);
  EXPECT_THAT(observed.warnings,
              ElementsAre("GPU: the driver does not report the memory of process 1000 of GPU 1; "
                          "counted as 0 bytes"));
}

TEST_F(GpuProbeTest, DriverVersionMismatchHintsAtAMissedReboot) {
  Nvml("init_error 18\n");
  GpuObservation o = ObserveGpus(options_);
  EXPECT_FALSE(o.known);
  EXPECT_THAT(o.error, HasSubstr("upgraded without a reboot"));
}

class NvidiaSmiTest : public GpuProbeTest {
 protected:
  void SetUp() override {
    GpuProbeTest::SetUp();
    options_.nvml_library = dir_ / "no-such-dir/libnvidia-ml.so.1";
    dir_.Write("smi-gpus.csv",
               "0, GPU-aaaa-0000, NVIDIA H200, 143771, 76330, 67441\n"
               "1, GPU-bbbb-1111, NVIDIA H200, 143771, 0, 143771\n");
    dir_.Write("smi-apps.csv",
               "GPU-aaaa-0000, 435, /usr/bin/python3, 75470\n"
               "GPU-aaaa-0000, 437, VLLM::Worker, [N/A]\n");
  }
};

TEST_F(NvidiaSmiTest, WithoutTheLibraryNvidiaSmiIsAskedInstead) {
  GpuObservation o = ObserveGpus(options_);

  ASSERT_TRUE(o.known) << o.error;
  EXPECT_EQ(o.source, "nvidia-smi");
  ASSERT_EQ(o.gpus.size(), 2u);
  EXPECT_EQ(o.gpus[0].uuid, "GPU-aaaa-0000");
  EXPECT_EQ(o.gpus[0].name, "NVIDIA H200");
  EXPECT_EQ(o.gpus[0].memory_total, 143771 * kMiB);
  EXPECT_EQ(o.gpus[0].memory_used, (143771 - 67441) * kMiB);  // total - free, like NVML
  EXPECT_EQ(o.gpus[1].index, 1);
  EXPECT_EQ(o.gpus[1].memory_used, 0u);
  EXPECT_THAT(o.gpus[1].processes, IsEmpty());
  ASSERT_EQ(o.gpus[0].processes.size(), 2u);
  EXPECT_EQ(o.gpus[0].processes[0].pid, 435);
  EXPECT_EQ(o.gpus[0].processes[0].used_bytes, 75470 * kMiB);
  EXPECT_EQ(o.gpus[0].processes[0].unit, "vllm-kimi-k25.service");
  EXPECT_EQ(o.gpus[0].processes[0].name, "python3");  // comm from /proc
  EXPECT_EQ(o.gpus[0].processes[1].pid, 437);
  EXPECT_EQ(o.gpus[0].processes[1].name, "VLLM::Worker");  // not in /proc: nvidia-smi's name
  EXPECT_EQ(o.gpus[0].processes[1].used_bytes, 0u);
  EXPECT_THAT(o.notes, ElementsAre(HasSubstr("no-such-dir/libnvidia-ml.so.1 not found (dlopen: "),
                                   HasSubstr("does not report the memory of process 437")));
  // Two queries, each argv exactly as written (no shell in between).
  EXPECT_THAT(Lines(dir_ / "smi-args.log"),
              ElementsAre("--query-gpu=index,uuid,name,memory.total,memory.used,memory.free",
                          "--format=csv,noheader,nounits", "",
                          "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                          "--format=csv,noheader,nounits", ""));
}

TEST_F(NvidiaSmiTest, NvidiaSmiIsFoundOnPath) {
  dir_.Link(FAKE_NVIDIA_SMI, "bin/nvidia-smi");
  setenv("PATH", (dir_.path() + "/empty:" + dir_.path() + "/bin:/usr/bin:/bin").c_str(), 1);
  options_.nvidia_smi = "";
  GpuObservation o = ObserveGpus(options_);
  ASSERT_TRUE(o.known) << o.error;
  EXPECT_EQ(o.source, "nvidia-smi");
  EXPECT_EQ(o.gpus.size(), 2u);
}

TEST_F(NvidiaSmiTest, ALibraryThatIsNotNvmlCountsAsMissing) {
  options_.nvml_library = "libm.so.6";
  GpuObservation o = ObserveGpus(options_);
  ASSERT_TRUE(o.known) << o.error;
  EXPECT_EQ(o.source, "nvidia-smi");
  EXPECT_THAT(o.notes, ::testing::Contains(HasSubstr("libm.so.6 lacks nvmlInit_v2")));
}

TEST_F(NvidiaSmiTest, NvidiaSmiWithoutADriverSaysSo) {
  setenv("FAKE_SMI_MODE", "fail", 1);
  GpuObservation o = ObserveGpus(options_);
  EXPECT_FALSE(o.known);
  EXPECT_EQ(o.source, "nvidia-smi");
  EXPECT_THAT(o.error, HasSubstr("failed (exit 9): NVIDIA-SMI has failed because it couldn't "
                                 "communicate with the NVIDIA driver"));
  EXPECT_THAT(o.error, HasSubstr("GPU memory checks are skipped"));
}

// nvidia-smi exits 6 when it finds no GPU: a known host with none, told by the exit code (its
// words are not read).
TEST_F(NvidiaSmiTest, NoDevicesIsAKnownEmptyListByItsExitCode) {
  setenv("FAKE_SMI_MODE", "none", 1);
  GpuObservation o = ObserveGpus(options_);
  EXPECT_TRUE(o.known) << o.error;
  EXPECT_EQ(o.source, "nvidia-smi");
  EXPECT_TRUE(o.gpus.empty());
}

TEST_F(NvidiaSmiTest, HungNvidiaSmiIsKilledAtTheTimeout) {
  setenv("FAKE_SMI_MODE", "hang", 1);
  options_.nvidia_smi_timeout_s = 1;
  auto start = std::chrono::steady_clock::now();
  GpuObservation o = ObserveGpus(options_);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(o.known);
  EXPECT_THAT(o.error, HasSubstr("did not answer within 1 s and was killed"));
  EXPECT_LT(took, std::chrono::seconds(30))
      << "a hang guard (the fake hangs forever), not a speed test";
}

TEST_F(NvidiaSmiTest, NeitherLibraryNorNvidiaSmiSaysBoth) {
  options_.nvidia_smi = dir_ / "no-such-dir/nvidia-smi";
  GpuObservation o = ObserveGpus(options_);
  EXPECT_FALSE(o.known);
  EXPECT_EQ(o.source, "");
  EXPECT_THAT(o.error, HasSubstr("no NVIDIA driver: " + (dir_ / "no-such-dir/libnvidia-ml.so.1") +
                                 " not found (dlopen: "));
  EXPECT_THAT(o.error, HasSubstr("nvidia-smi not found at "));
  EXPECT_THAT(o.error, HasSubstr("the plan uses the GPU inventory from the manifest or a saved "
                                 "observation"));
}

}  // namespace
}  // namespace berth
