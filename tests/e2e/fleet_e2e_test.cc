// A fleet end to end: three hosts, each a sandboxed systemd with a network namespace of its own
// (so each serves the same port, like separate machines) and a berth that runs inside it, and
// one real etcd (Debian's etcd-server) reached through a unix socket. One manifest for all.
// A prober per host, inside that host's network namespace, asks /health every few ms and
// records when the host was dark.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/e2e/e2e_fixture.h"
#include "tests/support/etcd_server.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using Steady = std::chrono::steady_clock;

/// When a host was certainly dark, as a prober inside its namespace saw it: from the end of the
/// first probe that failed to the start of the last one before it answered again (a probe
/// reflects the port at some moment of its own span; a busy machine stretches probes, and this
/// keeps the window to what was surely dark).
struct DarkSpan {
  Steady::time_point from, until;
};

enum class Probe { kUp, kDown, kUnknown };

/// GET /health over a plain socket (in the calling thread's network namespace): up (200), down
/// (refused, reset, or another status), or unknown (no answer in time: a starved machine).
Probe Check(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Probe::kUnknown;
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Probe result = Probe::kDown;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const char req[] = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof req - 1)) {
      char buf[64] = {};
      ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        result = Probe::kUnknown;
      else if (n > 12 &&
               std::string(buf, static_cast<size_t>(n)).find(" 200 ") != std::string::npos)
        result = Probe::kUp;
    }
  } else if (errno == ETIMEDOUT) {
    result = Probe::kUnknown;
  }
  ::close(fd);
  return result;
}

/// Probes one host from a thread that joined its network namespace (setns is per thread).
class Prober {
 public:
  Prober(const std::string& netns, int port) {
    std::promise<std::string> joined;
    thread_ = std::thread([this, netns, port, &joined] {
      int fd = ::open(netns.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
        if (fd >= 0) ::close(fd);
        joined.set_value("cannot join " + netns);
        return;
      }
      ::close(fd);
      joined.set_value("");
      bool dark = false;
      Steady::time_point first_fail_end, last_fail_start;
      while (!stop_) {
        auto start = Steady::now();
        Probe p = Check(port);
        auto end = Steady::now();
        if (p == Probe::kDown) {
          if (!dark) first_fail_end = end;
          dark = true;
          last_fail_start = start;
        } else if (p == Probe::kUp && dark) {
          dark = false;
          std::lock_guard<std::mutex> l(mu_);
          spans_.push_back({first_fail_end, last_fail_start});
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (dark) {
        std::lock_guard<std::mutex> l(mu_);
        spans_.push_back({first_fail_end, last_fail_start});
      }
    });
    error_ = joined.get_future().get();
  }
  ~Prober() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::vector<DarkSpan> spans() {
    std::lock_guard<std::mutex> l(mu_);
    return spans_;
  }
  const std::string& error() const { return error_; }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<DarkSpan> spans_;
  std::string error_;
  std::thread thread_;
};

bool Overlap(const DarkSpan& a, const DarkSpan& b) { return a.from < b.until && b.from < a.until; }

class FleetE2eTest : public ::testing::Test {
 protected:
  static constexpr int kHosts = 3;
  static constexpr int kPort = 18080;  // the same on every host: each has its own network

  void SetUp() override {
    BERTH_REQUIRE_SANDBOX();
    BERTH_REQUIRE_ETCD();
    tmp_ = std::filesystem::temp_directory_path() /
           ("berth-fleet-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(tmp_);
    EtcdServer::Options eo;
    eo.unix_socket = true;
    etcd_ = std::make_unique<EtcdServer>(eo);
    std::string error;
    ASSERT_TRUE(etcd_->Start(&error)) << error;
    store_ = (tmp_ / "store").string();
    MakeModel("org/old", std::string(40, 'a'));
    MakeModel("org/new", std::string(40, 'b'));
    for (int h = 0; h < kHosts; ++h) {
      SystemdSandbox::Options so;
      so.private_network = true;
      auto sb = SystemdSandbox::Start(SystemdSandbox::UniqueName("fleet"), so, &error);
      ASSERT_TRUE(sb) << error;
      CommandResult named = sb->Exec({"hostname", Host(h)});
      ASSERT_TRUE(named.ok()) << named.output << named.error;
      hosts_.push_back(std::move(sb));
    }
  }
  void TearDown() override {
    probers_.clear();
    hosts_.clear();
    etcd_.reset();
    std::error_code ec;
    if (!tmp_.empty()) std::filesystem::remove_all(tmp_, ec);
  }

  static std::string Host(int h) { return "fleet-" + std::to_string(h + 1); }

  void MakeModel(const std::string& repo, const std::string& commit) {
    HfCachePaths paths(store_, repo);
    CommandResult r =
        RunCommand({"/usr/bin/python3", SourceDir() + "/tests/fake_vllm/make_model.py",
                    paths.SnapshotDir(commit)});
    ASSERT_TRUE(r.ok()) << r.output << r.error;
  }

  /// The one manifest of the fleet: service `chat` on kPort runs model `model`.
  std::string Manifest(const std::string& model, const std::string& fleet_extra = "",
                       const std::string& env = "FAKE_VLLM_STARTUP_DELAY: \"0.5\"",
                       const std::string& health_timeout = "20s") {
    std::ostringstream m;
    m << "berth: 1\nhost:\n  store: " << store_ << "\n  executables: {vllm: " << FakeVllm() << "}\n"
      << "fleet:\n  name: e2e\n  etcd: {endpoints: [\"" << etcd_->unix_endpoint() << "\"]}\n"
      << "  max_unavailable: 1\n  lease_ttl: 3s\n  wait: 2m\n"
      << fleet_extra << "models:\n"
      << "  old: {source: hf://org/old, revision: " << std::string(40, 'a') << "}\n"
      << "  new: {source: hf://org/new, revision: " << std::string(40, 'b') << "}\n"
      << "services:\n  chat:\n    model: " << model
      << "\n    engine: vllm\n    gpus: [0]\n    port: " << kPort
      << "\n    bind: 127.0.0.1\n    env: {" << env << (env.empty() ? "" : ", ")
      << "PYTHONPATH: " << SourceDir() << "/tests/fake_vllm/pkg}\n"
      << "    health: {timeout: " << health_timeout << ", interval: 100ms}\n";
    std::string path = (tmp_ / ("berth-" + std::to_string(++manifests_) + ".yaml")).string();
    std::ofstream(path) << m.str();
    return path;
  }

  /// berth, inside host h (its mount, pid, uts and network namespaces: it sees that host's
  /// systemd, unit dir and loopback, and calls itself by that host's name).
  /// berth on host `h`; `berth` BERTH_FAULTY_BIN for the build with the fault seam.
  CommandResult Berth(int h, std::vector<std::string> args, std::vector<std::string> env = {},
                      const char* berth = BERTH_BIN) {
    std::vector<std::string> argv = {"/usr/bin/env"};
    for (auto& e : env) argv.push_back(e);
    argv.push_back(berth);
    for (auto& a : args) argv.push_back(a);
    return hosts_[h]->Exec(argv, std::chrono::seconds(180));
  }
  CommandResult Apply(int h, const std::string& manifest, std::vector<std::string> env = {},
                      const char* berth = BERTH_BIN) {
    return Berth(h,
                 {"apply", "-f", manifest, "--yes", "--state-dir",
                  (tmp_ / ("state-" + std::to_string(h))).string()},
                 std::move(env), berth);
  }
  /// Applies `manifest` on every host at once; their results in host order.
  std::vector<CommandResult> ApplyEverywhere(const std::string& manifest) {
    std::vector<CommandResult> results(kHosts);
    std::vector<std::thread> threads;
    for (int h = 0; h < kHosts; ++h)
      threads.emplace_back([&, h] { results[h] = Apply(h, manifest); });
    for (auto& t : threads) t.join();
    return results;
  }
  std::string Invocation(int h) {
    CommandResult r = hosts_[h]->Exec({"systemctl", "show", "-P", "InvocationID", "chat.service"},
                                      std::chrono::seconds(20));
    return r.output;
  }
  nlohmann::json FleetStatus(const std::string& manifest) {
    CommandResult r = Berth(0, {"fleet", "status", "-f", manifest, "-o", "json"});
    EXPECT_TRUE(r.ok()) << r.output << r.error;
    auto j = nlohmann::json::parse(r.output, nullptr, false);
    return j.is_discarded() ? nlohmann::json::object() : j;
  }
  void StartProbers() {
    for (int h = 0; h < kHosts; ++h)
      probers_.push_back(std::make_unique<Prober>(hosts_[h]->netns_path(), kPort));
  }

  std::filesystem::path tmp_;
  std::string store_;
  int manifests_ = 0;
  std::unique_ptr<EtcdServer> etcd_;
  std::vector<std::unique_ptr<SystemdSandbox>> hosts_;
  std::vector<std::unique_ptr<Prober>> probers_;
};

TEST_F(FleetE2eTest, TheCanaryGoesFirstAndNeverAreTwoHostsDarkAtOnce) {
  std::string waves =
      "  waves:\n    - {name: canary, hosts: [fleet-1]}\n"
      "    - {name: rest, hosts: [\"fleet-*\"]}\n";
  std::string v1 = Manifest("old", waves);
  for (const CommandResult& r : ApplyEverywhere(v1)) ASSERT_TRUE(r.ok()) << r.output << r.error;
  StartProbers();
  for (int h = 0; h < kHosts; ++h) ASSERT_TRUE(probers_[h]->error().empty());
  std::vector<std::string> before;
  for (int h = 0; h < kHosts; ++h) before.push_back(Invocation(h));

  // Every host at once, on the new manifest: each restarts chat onto model `new`.
  std::string v2 = Manifest("new", waves);
  std::vector<CommandResult> results = ApplyEverywhere(v2);
  for (int h = 0; h < kHosts; ++h)
    EXPECT_TRUE(results[h].ok()) << Host(h) << ":\n" << results[h].output << results[h].error;
  for (auto& p : probers_) p->Stop();

  std::vector<std::vector<DarkSpan>> dark;
  for (int h = 0; h < kHosts; ++h) {
    dark.push_back(probers_[h]->spans());
    EXPECT_EQ(dark[h].size(), 1u) << Host(h) << " went dark " << dark[h].size() << " times";
    EXPECT_NE(Invocation(h), before[h]) << Host(h) << " did not restart";
  }
  // Never two hosts dark at once.
  for (int a = 0; a < kHosts; ++a)
    for (int b = a + 1; b < kHosts; ++b)
      for (const DarkSpan& x : dark[a])
        for (const DarkSpan& y : dark[b])
          EXPECT_FALSE(Overlap(x, y)) << Host(a) << " and " << Host(b) << " were dark together";
  // The canary's dark window ended before any other began.
  ASSERT_FALSE(dark[0].empty());
  for (int h = 1; h < kHosts; ++h)
    for (const DarkSpan& y : dark[h]) EXPECT_LT(dark[0].back().until, y.from) << Host(h);
  // The others said what they waited for.
  EXPECT_THAT(results[1].output + results[2].output, HasSubstr("waiting: wave canary goes first"));

  nlohmann::json status = FleetStatus(v2);
  ASSERT_EQ(status["hosts"].size(), 3u) << status.dump(2);
  for (const auto& host : status["hosts"]) {
    EXPECT_EQ(host["state"], "converged") << host.dump();
    EXPECT_EQ(host["on_this_manifest"], true) << host.dump();
  }
  EXPECT_TRUE(status["slots"].empty()) << status.dump(2);
  EXPECT_EQ(status["hosts"][0]["host"], "fleet-1");
  EXPECT_EQ(status["hosts"][0]["wave"], "canary");
}

TEST_F(FleetE2eTest, AFailedGateOnTheCanaryStopsTheOthersUntilTheManifestChanges) {
  std::string waves =
      "  waves:\n    - {name: canary, hosts: [fleet-1]}\n"
      "    - {name: rest, hosts: [\"fleet-*\"]}\n";
  for (const CommandResult& r : ApplyEverywhere(Manifest("old", waves)))
    ASSERT_TRUE(r.ok()) << r.output << r.error;
  std::string inv1 = Invocation(1), inv2 = Invocation(2);
  // The new manifest never answers /health: the canary rolls back and reports it failed.
  std::string bad = Manifest("new", waves, "FAKE_VLLM_FAIL_HEALTH: \"1\"", "3s");
  CommandResult canary = Apply(0, bad);
  EXPECT_EQ(canary.exit_code, 4) << canary.output << canary.error;
  for (int h = 1; h < kHosts; ++h) {
    CommandResult r = Apply(h, bad);
    EXPECT_EQ(r.exit_code, 1) << r.output << r.error;
    EXPECT_THAT(r.output, HasSubstr("it failed on fleet-1"));
  }
  EXPECT_EQ(Invocation(1), inv1);
  EXPECT_EQ(Invocation(2), inv2);
  nlohmann::json status = FleetStatus(bad);
  EXPECT_EQ(status["hosts"][0]["state"], "failed") << status.dump(2);
  // A fixed manifest is a new rollout: the canary goes, then the rest.
  std::string fixed = Manifest("new", waves);
  ASSERT_TRUE(Apply(0, fixed).ok());
  for (int h = 1; h < kHosts; ++h) {
    CommandResult r = Apply(h, fixed);
    EXPECT_TRUE(r.ok()) << r.output << r.error;
  }
}

TEST_F(FleetE2eTest, AKilledSlotHolderFreesItsSlotWhenTheLeaseExpiresAndEtcdDownBlocksDarkSteps) {
  for (const CommandResult& r : ApplyEverywhere(Manifest("old")))
    ASSERT_TRUE(r.ok()) << r.output << r.error;
  std::string v2 = Manifest("new");
  // fleet-1 takes the slot and is killed -9 at its restart (after the turn, before anything
  // gives it back; berth_faulty, the build with the fault seam): the slot stays until its 3 s
  // lease expires.
  CommandResult plan =
      Berth(0, {"plan", "-f", v2, "-o", "json", "--state-dir", (tmp_ / "state-0").string()});
  auto j = nlohmann::json::parse(plan.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << plan.output << plan.error;
  int restart = 0;
  for (const auto& a : j["resource_changes"])
    if (a["action"] == "restart") restart = a["step"].get<int>();
  ASSERT_GT(restart, 0) << plan.output;
  CommandResult killed =
      Apply(0, v2, {"BERTH_FAULT_KILL_AT_STEP=" + std::to_string(restart)}, BERTH_FAULTY_BIN);
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL) << killed.output << killed.error;
  nlohmann::json status = FleetStatus(v2);
  ASSERT_EQ(status["slots"].size(), 1u) << status.dump(2);
  EXPECT_EQ(status["slots"][0]["host"], "fleet-1");
  // fleet-2 waits for that slot, then switches once the lease is gone.
  CommandResult second = Apply(1, v2);
  EXPECT_TRUE(second.ok()) << second.output << second.error;
  EXPECT_THAT(second.output,
              HasSubstr("waiting: all 1 slot is held (max_unavailable 1): by fleet-1"));

  // etcd stops: fleet-3 does not take chat down, and says why; back up, it switches.
  std::string inv = Invocation(2);
  ASSERT_TRUE(etcd_->Stop());
  CommandResult blocked = Apply(2, v2);
  EXPECT_EQ(blocked.exit_code, 1) << blocked.output << blocked.error;
  EXPECT_THAT(blocked.output + blocked.error, HasSubstr("etcd cannot be reached"));
  EXPECT_EQ(Invocation(2), inv);
  std::string error;
  ASSERT_TRUE(etcd_->Start(&error)) << error;
  CommandResult after = Apply(2, v2);
  EXPECT_TRUE(after.ok()) << after.output << after.error;
  EXPECT_NE(Invocation(2), inv);

  // fleet-3 leaves the fleet: its report goes, the others stay.
  CommandResult forgot = Berth(0, {"fleet", "forget", "-f", v2, "fleet-3"});
  EXPECT_TRUE(forgot.ok()) << forgot.output << forgot.error;
  EXPECT_THAT(forgot.output, HasSubstr("fleet e2e: forgot fleet-3"));
  nlohmann::json left = FleetStatus(v2);
  ASSERT_EQ(left["hosts"].size(), 2u) << left.dump(2);
  EXPECT_EQ(left["hosts"][0]["host"], "fleet-1");
  EXPECT_EQ(left["hosts"][1]["host"], "fleet-2");
}

}  // namespace
}  // namespace berth::testing
