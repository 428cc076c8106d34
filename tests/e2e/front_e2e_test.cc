// Fronts end to end: a port held by a real HAProxy (berth-front-PORT, a unit berth writes and
// runs on the sandboxed systemd) while berth switches the fake vLLM behind it, under the
// operator's prober (tests/prober/prober.py: a request every 10 ms on a new connection, streamed
// completions held open). Make-before-break, a stop-first switch that holds requests, a failed
// replacement routed back, an in-place restart and a reload of the front's configuration: no
// connection is ever refused.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/cli/commands.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;

class FrontE2eTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(std::filesystem::exists("/usr/sbin/haproxy"))
        << "haproxy is not installed: .ci/setup --tests installs Debian's haproxy package";
    store_ = (tmp_ / "store").string();
    MakeModel(store_, "org/a", std::string(40, 'a'));
    MakeModel(store_, "org/b", std::string(40, 'b'));
    port_ = FreePort();
    // Short: the front's sockets live there (108 bytes at most).
    fronts_ = "/tmp/bf-" + std::to_string(::getpid()) + "-" + std::to_string(port_);
    std::filesystem::create_directories(fronts_);
  }
  void TearDown() override {
    StopProber();
    SandboxSuite::TearDown();
    std::error_code ec;
    std::filesystem::remove_all(fronts_, ec);
  }

  struct Svc {
    Svc(std::string n, std::string m, std::string st = "running", std::string strat = "",
        std::string e = "", std::string h = "{timeout: 30s, interval: 100ms}")
        : name(std::move(n)),
          model(std::move(m)),
          state(std::move(st)),
          strategy(std::move(strat)),
          env(std::move(e)),
          health(std::move(h)) {}
    std::string name, model, state, strategy, env, health;
    std::string gates;  // the service's gates: mapping, "" none
  };
  std::string Manifest(const std::vector<Svc>& services,
                       const std::string& front = "{hold: 1m, drain: 30s}") {
    std::ostringstream m;
    m << "berth: 1\nhost:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir()
      << "\n  front_dir: " << fronts_ << "\n  executables: {vllm: " << FakeVllm() << "}\n"
      << "fronts:\n  " << port_ << ": " << front << "\n"
      << "models:\n"
      << "  a: {source: hf://org/a, revision: " << std::string(40, 'a') << "}\n"
      << "  b: {source: hf://org/b, revision: " << std::string(40, 'b') << "}\n"
      << "services:\n";
    for (const Svc& s : services) {
      m << "  " << s.name << ":\n    model: " << s.model << "\n    engine: vllm\n    gpus: [0]\n"
        << "    port: " << port_ << "\n    backend_port: " << Backend(s.name)
        << "\n    state: " << s.state << "\n    health: " << s.health
        << "\n    preflight: {engine: off}\n"
        << "    vllm: {served_model_name: " << s.model << "}\n"
        << "    env: {FAKE_VLLM_TOKENS_PER_SECOND: '50'" << (s.env.empty() ? "" : ", " + s.env)
        << "}\n";
      if (!s.strategy.empty()) m << "    strategy: " << s.strategy << "\n";
      if (!s.gates.empty()) m << "    gates: " << s.gates << "\n";
      if (standby_) m << "    standby: sleep\n";
    }
    std::string path = (tmp_ / ("berth-" + std::to_string(++manifests_) + ".yaml")).string();
    std::ofstream(path) << m.str();
    return path;
  }
  // Each service's backend port, free when first asked (sandboxes share the host's network, so
  // the ports berth would derive from the names could collide between tests run at once).
  int Backend(const std::string& name) {
    auto [it, fresh] = backends_.emplace(name, 0);
    if (fresh) it->second = FreePort();
    return it->second;
  }
  int Apply(const std::string& manifest) { return ApplyIn(manifest, out_, err_, nvml_); }
  std::string PlanText(const std::string& manifest) {
    PlanCommand cmd;
    cmd.manifest_path = manifest;
    cmd.host.bus_address = sandbox_->system_bus_address();
    cmd.state_dir = (tmp_ / "state").string();
    if (!nvml_.empty()) cmd.host.nvml_library = nvml_;
    out_.str("");
    err_.str("");
    RunPlan(cmd, out_, err_);
    return out_.str();
  }

  // berth_faulty's apply, killed -9 as step `step` begins; its wait status.
  int ApplyKilledAt(const std::string& manifest, int step) {
    return Wait(ApplyProcess(BERTH_FAULTY_BIN, manifest,
                             {"BERTH_FAULT_KILL_AT_STEP=" + std::to_string(step)},
                             {"--state-dir", (tmp_ / "state").string()}));
  }

  // The prober on the public port: a request every 10 ms (GET /v1/models and completions, in
  // turn), `streams` streamed completions of 100 tokens at the fakes' 50 tok/s held open.
  // `body_bytes`: each completion's request body is about that long (a long prompt).
  void StartProber(int streams = 2, int body_bytes = 0) {
    prober_.Start(tmp_, "http://127.0.0.1:" + std::to_string(port_),
                  {"--interval-ms", "10", "--path", "/v1/models", "--completions", "--streams",
                   std::to_string(streams), "--stream-tokens", "100", "--timeout", "120",
                   "--body-bytes", std::to_string(body_bytes)});
  }
  // Stops the prober (it finishes what is in flight) and reads its summary.
  nlohmann::json StopProber() { return prober_.Stop(); }
  static int Count(const nlohmann::json& s, const char* cls) {
    return ProberProcess::Count(s, cls);
  }
  // The model /v1/models lists through the front now.
  std::string ServedModel() {
    CommandResult r =
        RunCommand({"/usr/bin/python3", "-c",
                    "import sys, urllib.request\n"
                    "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())",
                    "http://127.0.0.1:" + std::to_string(port_) + "/v1/models"});
    auto j = nlohmann::json::parse(r.output, nullptr, false);
    if (j.is_discarded() || !j.contains("data") || j["data"].empty())
      return "(none: " + r.output + ")";
    return j["data"][0].value("id", "");
  }

  std::string store_, fronts_;
  std::string nvml_;      // the NVML library berth loads ("": berth's default)
  bool standby_ = false;  // every service gets standby: sleep
  int port_ = 0;
  int manifests_ = 0;
  ProberProcess prober_;
  std::map<std::string, int> backends_;
  std::ostringstream out_, err_;
};

TEST_F(FrontE2eTest, AMakeBeforeBreakSwitchRefusesNothingAndEveryStreamCompletes) {
  ASSERT_EQ(Apply(Manifest({{"svc-a", "a"}})), 0) << out_.str() << err_.str();
  EXPECT_EQ(ServedModel(), "a");
  std::string next = Manifest({{"svc-a", "a", "stopped"}, {"svc-b", "b"}});
  std::string plan = PlanText(next);
  EXPECT_THAT(plan, HasSubstr("no disruption: make-before-break")) << plan;
  StartProber();
  ASSERT_EQ(Apply(next), 0) << out_.str() << err_.str();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  nlohmann::json s = StopProber();
  EXPECT_EQ(Count(s, "refused"), 0) << s.dump();
  EXPECT_EQ(s.value("failed", -1), 0) << s.dump();
  EXPECT_GT(s.value("streams_started", 0), 0) << s.dump();
  EXPECT_EQ(s.value("streams_completed", -1), s.value("streams_started", -2)) << s.dump();
  EXPECT_TRUE(s["models"].contains("a") && s["models"].contains("b")) << s.dump();
  EXPECT_EQ(ServedModel(), "b");
}

TEST_F(FrontE2eTest, AStopFirstSwitchHoldsRequestsUntilTheNewServerServes) {
  ASSERT_EQ(Apply(Manifest({{"svc-a", "a"}})), 0) << out_.str() << err_.str();
  // svc-b takes 3 s to load: requests sent meanwhile wait in the front.
  std::string next =
      Manifest({{"svc-a", "a", "stopped"},
                {"svc-b", "b", "running", "stop-first", "FAKE_VLLM_STARTUP_DELAY: '3'"}});
  std::string plan = PlanText(next);
  EXPECT_THAT(plan, HasSubstr("held up to 1m, not refused")) << plan;
  StartProber(2, 200000);  // held completions carry 200 KB bodies
  ASSERT_EQ(Apply(next), 0) << out_.str() << err_.str();
  nlohmann::json s = StopProber();
  EXPECT_EQ(Count(s, "refused"), 0) << s.dump();
  EXPECT_EQ(Count(s, "reset"), 0) << s.dump();
  EXPECT_EQ(s.value("failed", -1), 0) << s.dump();
  EXPECT_GT(s["held"].value("n", 0), 0) << "no request waited: was anything held? " << s.dump();
  EXPECT_EQ(ServedModel(), "b");
}

TEST_F(FrontE2eTest, AFailedReplacementIsRoutedBackAndRefusesNothing) {
  ASSERT_EQ(Apply(Manifest({{"svc-a", "a"}})), 0) << out_.str() << err_.str();
  Svc bad{"svc-b",
          "b",
          "running",
          "stop-first",
          "FAKE_VLLM_FAIL_HEALTH: '1'",
          "{timeout: 3s, interval: 100ms}"};
  StartProber();
  EXPECT_EQ(Apply(Manifest({{"svc-a", "a", "stopped"}, bad})), 4) << out_.str() << err_.str();
  nlohmann::json s = StopProber();
  EXPECT_EQ(Count(s, "refused"), 0) << s.dump();
  EXPECT_EQ(Count(s, "reset"), 0) << s.dump();
  EXPECT_EQ(ServedModel(), "a") << out_.str() << err_.str();
}

TEST_F(FrontE2eTest, ARestartInPlaceAndAFrontReloadRefuseNothing) {
  ASSERT_EQ(Apply(Manifest({{"svc-a", "a"}})), 0) << out_.str() << err_.str();
  StartProber();
  // A changed environment restarts svc-a in place: the front holds while it restarts.
  ASSERT_EQ(Apply(Manifest({{"svc-a", "a", "running", "", "FAKE_VLLM_STARTUP_DELAY: '1'"}})), 0)
      << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("holding new requests")) << out_.str();
  // A new backend (svc-b, stopped) changes the front's configuration: a seamless reload.
  ASSERT_EQ(Apply(Manifest({{"svc-a", "a", "running", "", "FAKE_VLLM_STARTUP_DELAY: '1'"},
                            {"svc-b", "b", "stopped"}})),
            0)
      << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("reloaded seamlessly")) << out_.str();
  nlohmann::json s = StopProber();
  EXPECT_EQ(Count(s, "refused"), 0) << s.dump();
  EXPECT_EQ(Count(s, "reset"), 0) << s.dump();
  EXPECT_EQ(s.value("failed", -1), 0) << s.dump();
  EXPECT_EQ(s.value("streams_completed", -1), s.value("streams_started", -2)) << s.dump();
  EXPECT_EQ(ServedModel(), "a");
}

// An interrupted stop-first switch whose replacement fails its smoke gate (issue 37, 1): the
// next apply ran `route front/P -> svc-b` before svc-b's gates, and its rollback, though it
// started svc-a again, left the front on svc-b (stopped): every request 503 while svc-a served.
// Now the gates come first, the undo routes back to what served before the switch (the killed
// apply's journal keeps it), and the change is held: svc-a is not stopped again.
TEST_F(FrontE2eTest, AnInterruptedSwitchWhoseReplacementFailsEndsRoutedToTheOldServer) {
  ASSERT_EQ(Apply(Manifest({{"svc-a", "a"}})), 0) << out_.str() << err_.str();
  Svc bad{"svc-b", "b", "running", "stop-first", "FAKE_VLLM_EMPTY_COMPLETIONS: '1'"};
  bad.gates = "{smoke: {prompt: Say hello., max_tokens: 4, timeout: 10s}}";
  const std::string m = Manifest({{"svc-a", "a", "stopped"}, bad});
  int k = StepOf(PlanText(m), "wait-healthy", "service/svc-b");
  ASSERT_GT(k, 0) << out_.str();
  int status = ApplyKilledAt(m, k);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status;
  ASSERT_EQ(ActiveState("svc-a.service"), "inactive");
  ASSERT_EQ(ActiveState("svc-b.service"), "active");

  const std::string plan = PlanText(m);
  int smoke = StepOf(plan, "smoke", "service/svc-b");
  int route = StepOf(plan, "route", "front/" + std::to_string(port_));
  ASSERT_GT(smoke, 0) << plan;
  EXPECT_GT(route, smoke) << "the front routes to svc-b only after its gates\n" << plan;

  EXPECT_EQ(Apply(m), kExitFailed) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("the smoke gate of svc-b.service failed"));
  EXPECT_THAT(err_.str(), HasSubstr("svc-a.service is healthy again"));
  EXPECT_THAT(err_.str(),
              HasSubstr("route the front of port " + std::to_string(port_) + " back to svc-a"));
  EXPECT_EQ(ServedModel(), "a") << "the front serves the healthy svc-a, not 503s";

  // Held: the loop's terminal rule; svc-a is not taken down for another try, and every request
  // meanwhile is answered by it.
  StartProber();
  EXPECT_EQ(Apply(m), kExitBlocked) << out_.str() << err_.str();
  nlohmann::json s = StopProber();
  EXPECT_EQ(Count(s, "refused"), 0) << s.dump();
  EXPECT_EQ(s.value("failed", -1), 0) << s.dump();
  EXPECT_EQ(ActiveState("svc-a.service"), "active");
  EXPECT_EQ(ServedModel(), "a");
}

// The file a front loads next and what the running HAProxy serves can differ (issue 37, 2): a
// reload it refused, a kill between the write and the reload, a hand edit. Here the file is put
// back to an older configuration by hand: it is exactly what berth renders for the manifest, yet
// the running front serves svc-b too. The plan sees it (the admin socket lists the servers) and
// writes and reloads the front; then both agree and nothing is left.
TEST_F(FrontE2eTest, AFileThatDiffersFromWhatTheRunningFrontServesIsSeenAndPlanned) {
  const std::string one = Manifest({{"svc-a", "a"}});
  ASSERT_EQ(Apply(one), 0) << out_.str() << err_.str();
  const std::string cfg = fronts_ + "/" + std::to_string(port_) + ".cfg";
  const std::string first = ReadAll(cfg);
  ASSERT_EQ(Apply(Manifest({{"svc-a", "a"}, {"svc-b", "b", "stopped"}})), 0)
      << out_.str() << err_.str();
  std::ofstream(cfg, std::ios::trunc) << first;
  const std::string plan = PlanText(one);
  EXPECT_THAT(plan, HasSubstr("write-front")) << plan;
  EXPECT_THAT(plan, HasSubstr("reloaded seamlessly")) << plan;
  ASSERT_EQ(Apply(one), 0) << out_.str() << err_.str();
  EXPECT_THAT(PlanText(one), HasSubstr("No changes")) << out_.str();
  EXPECT_EQ(ServedModel(), "a");
}

// Any local user could bind the front's abstract hold socket first and keep it from starting
// (issue 37, 6): the hold loop is a unix socket in the front's own folder now.
TEST_F(FrontE2eTest, TheFrontStartsThoughSomeoneHoldsTheOldAbstractHoldName) {
  int squatter = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string name = "berth-front-" + std::to_string(port_) + "-hold";
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  ASSERT_EQ(::bind(squatter, reinterpret_cast<sockaddr*>(&addr),
                   static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size())),
            0);
  ::listen(squatter, 1);
  EXPECT_EQ(Apply(Manifest({{"svc-a", "a"}})), 0) << out_.str() << err_.str();
  EXPECT_EQ(ServedModel(), "a");
  EXPECT_TRUE(std::filesystem::exists(fronts_ + "/" + std::to_string(port_) + ".hold"));
  ::close(squatter);
}

// Standby (`standby: sleep`, issue 25): the GPU is the fake NVML's one 80 GiB device, and each
// fake vLLM claims 90% of it while awake and 512 MiB asleep (its claims file, which the fake
// NVML reads): the two servers cannot run side by side, so a switch must free the GPU. A cold
// start of either loads for 3 s; a wake takes 0.3 s.
class StandbyE2eTest : public FrontE2eTest {
 protected:
  static constexpr uint64_t kGpu = 80ULL << 30;
  void SetUp() override {
    FrontE2eTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    claims_ = (tmp_ / "claims").string();
    std::filesystem::create_directories(claims_);
    std::filesystem::permissions(claims_, std::filesystem::perms::all);
    config_ = (tmp_ / "nvml.conf").string();
    std::ofstream(config_) << "device 0 GPU-standby-0 " << kGpu << " 0 0 NVIDIA H200\n";
    ::setenv("FAKE_NVML_CONFIG", config_.c_str(), 1);
    ::setenv("FAKE_NVML_CLAIMS_DIR", claims_.c_str(), 1);
    nvml_ = FAKE_NVML_FULL;
    standby_ = true;
  }
  void TearDown() override {
    FrontE2eTest::TearDown();
    ::unsetenv("FAKE_NVML_CONFIG");
    ::unsetenv("FAKE_NVML_CLAIMS_DIR");
  }
  // The fake vLLM's settings for a standby test: its GPU claims, its load and wake times.
  std::string Env(const std::string& more = "") const {
    return "FAKE_NVML_CLAIMS_DIR: '" + claims_ + "', FAKE_VLLM_GPU_BYTES: '" +
           std::to_string(kGpu / 10 * 9) +
           "', FAKE_VLLM_SLEEP_GPU_BYTES: '536870912', FAKE_VLLM_STARTUP_DELAY: '3', "
           "FAKE_VLLM_WAKE_SECONDS: '0.3'" +
           (more.empty() ? "" : ", " + more);
  }
  Svc Standby(const std::string& name, const std::string& model, const std::string& state,
              const std::string& more = "",
              const std::string& health = "{timeout: 30s, interval: 100ms}") const {
    return Svc(name, model, state, "", Env(more), health);
  }
  // systemd's invocation of `unit` now: another one means it was started again.
  std::string Invocation(const std::string& unit) {
    auto units = systemd_->GetUnits({unit});
    if (!units.ok() || units->empty()) return "(unknown)";
    return (*units)[0].invocation_id;
  }
  // What the server behind `name`'s backend port says of its sleep.
  std::string IsSleeping(const std::string& name) {
    CommandResult r =
        RunCommand({"/usr/bin/python3", "-c",
                    "import sys, urllib.request\n"
                    "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())",
                    "http://127.0.0.1:" + std::to_string(Backend(name)) + "/is_sleeping"});
    return r.output;
  }
  std::string claims_, config_;
};

TEST_F(StandbyE2eTest, ASwitchPutsTheOldServerToSleepAndASwitchBackWakesIt) {
  const std::string a_on =
      Manifest({Standby("svc-a", "a", "running"), Standby("svc-b", "b", "stopped")});
  ASSERT_EQ(Apply(a_on), 0) << out_.str() << err_.str();
  const std::string a_started = Invocation("svc-a.service");
  // To b: a cannot stay awake beside it (90% of the GPU each), so it sleeps; b starts cold.
  const std::string b_on =
      Manifest({Standby("svc-a", "a", "stopped"), Standby("svc-b", "b", "running")});
  std::string plan = PlanText(b_on);
  EXPECT_THAT(plan, HasSubstr("standby: sleep: put to sleep, not stopped")) << plan;
  StartProber();
  ASSERT_EQ(Apply(b_on), 0) << out_.str() << err_.str();
  // Checked with NVML before b started: a's processes hold only its sleeping residue.
  EXPECT_THAT(out_.str(), HasSubstr("service/svc-a is asleep; NVML: its processes hold GPU 0 "
                                    "537 MB"))
      << out_.str();
  EXPECT_EQ(ServedModel(), "b");
  EXPECT_THAT(IsSleeping("svc-a"), HasSubstr("\"is_sleeping\": true"));
  EXPECT_EQ(Invocation("svc-a.service"), a_started) << "a sleeps; it was not stopped";
  // The next plan keeps it asleep and says so.
  plan = PlanText(b_on);
  EXPECT_THAT(plan, HasSubstr("asleep (standby: sleep)")) << plan;
  EXPECT_THAT(plan, HasSubstr("No changes")) << plan;
  // Back to a: b sleeps, a wakes; a is the process that slept, not a new one.
  const std::string b_started = Invocation("svc-b.service");
  ASSERT_EQ(Apply(a_on), 0) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("service/svc-a is awake")) << out_.str();
  EXPECT_EQ(Invocation("svc-a.service"), a_started) << "woken, not started again";
  EXPECT_EQ(Invocation("svc-b.service"), b_started) << "b sleeps; it was not stopped";
  EXPECT_THAT(IsSleeping("svc-a"), HasSubstr("\"is_sleeping\": false"));
  EXPECT_THAT(IsSleeping("svc-b"), HasSubstr("\"is_sleeping\": true"));
  EXPECT_EQ(ServedModel(), "a");
  nlohmann::json s = StopProber();
  EXPECT_EQ(Count(s, "refused"), 0) << s.dump();
  // What each switch took, from start (or wake) to healthy, as berth recorded it: the figures
  // for the closing note, not a test of speed.
  auto state =
      nlohmann::json::parse(ReadAll((tmp_ / "state" / "state.json").string()), nullptr, false);
  if (!state.is_discarded() && state.contains("start_times_ms"))
    std::cout << "[ figures  ] start to healthy (ms): " << state["start_times_ms"].dump() << "\n";
}

TEST_F(StandbyE2eTest, ARollbackWakesTheServerItPutToSleep) {
  const std::string a_on =
      Manifest({Standby("svc-a", "a", "running"), Standby("svc-b", "b", "stopped")});
  ASSERT_EQ(Apply(a_on), 0) << out_.str() << err_.str();
  const std::string a_started = Invocation("svc-a.service");
  // b never becomes healthy: its gate fails after 3 s and the switch is undone.
  Svc bad = Standby("svc-b", "b", "running", "FAKE_VLLM_FAIL_HEALTH: '1'",
                    "{timeout: 3s, interval: 100ms}");
  StartProber();
  EXPECT_EQ(Apply(Manifest({Standby("svc-a", "a", "stopped"), bad})), 4)
      << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("rollback: wake svc-a.service (asleep since the switch)"))
      << out_.str();
  EXPECT_EQ(Invocation("svc-a.service"), a_started) << "woken, not started again";
  EXPECT_THAT(IsSleeping("svc-a"), HasSubstr("\"is_sleeping\": false"));
  EXPECT_EQ(ServedModel(), "a");
  nlohmann::json s = StopProber();
  EXPECT_EQ(Count(s, "refused"), 0) << s.dump();
}

}  // namespace
}  // namespace berth::testing
