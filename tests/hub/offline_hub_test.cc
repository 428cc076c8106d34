// A host that cannot reach the Hub, or a Hub that answers only 503: one question (or a short,
// bounded retry) and no more, for the whole run; the plan is made from berth.lock and the store
// and says so once. Also the bounds on what berth takes in: an API answer's size, and the free
// space of the store before a pull. Attempts are counted (the fake Hub's log, HubHttp's count)
// and waits are on a fake clock: nothing here depends on how fast the machine is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/observe/live_observer.h"
#include "planners/planner.h"
#include "providers/hub/hub_api.h"
#include "providers/hub/pull.h"
#include "providers/systemd/unit_files.h"
#include "tests/hub/fake_hub_server.h"
#include "tests/hub/space_fs.h"
#include "tests/support/fake_clock.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

/// A loopback port nothing listens on: bound, then closed, so a connect is refused.
int ClosedPort() {
  int s = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(s);
  return ntohs(a.sin_port);
}

class OfflineHubTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/berth-offline-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    hub_ = new FakeHubServer;
    if (!hub_->Start(dir_, (2ull << 20) + 7, {}, &error_)) {
      delete hub_;
      hub_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete hub_;
    hub_ = nullptr;
    fs::remove_all(dir_);
  }
  void SetUp() override {
    ASSERT_NE(hub_, nullptr) << "the fake Hub did not start: " << error_;
    hub_->Reset();
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    work_ = dir_ + "/" + name;
    store_ = work_ + "/store";
    fs::create_directories(work_ + "/manifests");
    fs::create_directories(work_ + "/units");
    opts_.endpoint = hub_->api();
    opts_.connections = 4;
    opts_.max_attempts = 8;  // the default: what bounds the waits here is the run's memory
    opts_.clock = &clock_;
  }
  void TearDown() override {
    ::unsetenv("HF_ENDPOINT");
    ::unsetenv("HF_HUB_OFFLINE");
  }

  Result<PullResult> Pull(const std::string& repo, StoreFs* fs = nullptr, uint64_t reserve = 0) {
    PullRequest req;
    req.store = store_;
    req.repo_id = repo;
    req.fs = fs;
    req.reserve_bytes = reserve;
    return PullModel(req, opts_);
  }
  /// Requests of the fake Hub's log on its API port whose path starts with `prefix`.
  int ApiRequests(const std::string& prefix = "/") const {
    int n = 0;
    for (const auto& e : hub_->Log())
      if (e.value("port", "") == "api" && e.value("path", "").rfind(prefix, 0) == 0) ++n;
    return n;
  }
  /// A manifest of org/tiny and org/many in `store_` (services when `services`), and berth.lock
  /// pinning the commits in `pins` (model name -> commit).
  std::string Manifest(const std::map<std::string, std::string>& pins, bool services = false) {
    std::ostringstream m;
    m << "berth: 1\nhost:\n  store: " << store_ << "\n  unit_dir: " << work_ << "/units\n"
      << "  executables: {vllm: /bin/true}\n"
      << "models:\n  tiny: {source: hf://org/tiny}\n  many: {source: hf://org/many}\n";
    if (services)
      m << "services:\n"
        << "  svc-tiny: {model: tiny, engine: vllm, gpus: [0], port: 18001}\n"
        << "  svc-many: {model: many, engine: vllm, gpus: [0], port: 18002}\n";
    std::ofstream(work_ + "/manifests/berth.yaml") << m.str();
    std::string lock = R"({"format_version": 1, "models": {)";
    bool first = true;
    for (const auto& [name, commit] : pins) {
      lock += std::string(first ? "" : ", ") + "\"" + name + R"(": {"repo": "org/)" + name +
              R"(", "revision": "main", "commit": ")" + commit +
              R"(", "locked_at": "2026-12-01T06:00:00Z"})";
      first = false;
    }
    fs::remove(work_ + "/manifests/berth.lock");
    if (!pins.empty()) std::ofstream(work_ + "/manifests/berth.lock") << lock << "}}";
    return work_ + "/manifests";
  }
  /// Both models pulled into the store and pinned in berth.lock at what was pulled.
  std::map<std::string, std::string> PulledAndPinned() {
    std::map<std::string, std::string> pins;
    for (const char* name : {"tiny", "many"}) {
      auto r = Pull(std::string("org/") + name);
      EXPECT_TRUE(r.ok()) << r.status().message();
      if (r.ok()) pins[name] = r->snapshot.commit;
    }
    hub_->Reset();
    return pins;
  }
  Result<Observed> Observe(const Desired& d, const std::string& endpoint) {
    UnitFileStore units(work_ + "/units");
    LiveObserverOptions o;
    o.systemd_error = "not observed in this test";
    o.unit_files = &units;
    o.hub = opts_;
    o.hub.endpoint = endpoint;
    o.clock = &clock_;
    o.gpu.nvml_library = "/nonexistent/libnvidia-ml.so.1";
    LiveObserver observer(o);
    return observer.Observe(d);
  }
  static std::vector<std::string> HubWarnings(const Observed& o) {
    std::vector<std::string> out;
    for (const auto& w : o.warnings)
      if (w.find("Hub") != std::string::npos) out.push_back(w);
    return out;
  }
  static int ModelActions(const Plan& p) {
    int n = 0;
    for (const auto& a : p.actions)
      if (a.kind == ActionKind::kDownload || a.kind == ActionKind::kRemoveModel) ++n;
    return n;
  }

  static FakeHubServer* hub_;
  static std::string dir_, error_;
  std::string work_, store_;
  FakeClock clock_;
  HubOptions opts_;
};

FakeHubServer* OfflineHubTest::hub_ = nullptr;
std::string OfflineHubTest::dir_, OfflineHubTest::error_;

TEST_F(OfflineHubTest, AHubWhoseNameDoesNotResolveIsAskedOnceForTheWholeRun) {
  opts_.endpoint = "http://berth-offline.invalid";
  HubHttp http(opts_);
  auto first = ResolveSnapshot(http, "org/tiny", "main");
  ASSERT_FALSE(first.ok());
  EXPECT_THAT(first.status().message(), HasSubstr("berth-offline.invalid"));
  EXPECT_THAT(first.status().message(), HasSubstr("not retried: the Hub cannot be reached"));
  EXPECT_EQ(http.requests_sent(), 1);
  EXPECT_TRUE(clock_.sleeps.empty()) << "no backoff for a name that does not resolve";
  EXPECT_FALSE(http.unreachable().ok());
  // The next model of the run does not ask again.
  auto second = ResolveSnapshot(http, "org/many", "main");
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("not asked"));
  EXPECT_EQ(http.requests_sent(), 1);
}

TEST_F(OfflineHubTest, AHubThatRefusesTheConnectionIsAskedOnceForTheWholeRun) {
  opts_.endpoint = "http://127.0.0.1:" + std::to_string(ClosedPort());
  HubHttp http(opts_);
  EXPECT_FALSE(ResolveSnapshot(http, "org/tiny", "main").ok());
  EXPECT_FALSE(ResolveSnapshot(http, "org/many", "v1.0").ok());
  EXPECT_EQ(http.requests_sent(), 1);
  EXPECT_TRUE(clock_.sleeps.empty());
}

TEST_F(OfflineHubTest, OfflineAPinnedAndCompleteStorePlansNothingAndWarnsOnce) {
  auto pins = PulledAndPinned();
  ASSERT_EQ(pins.size(), 2u);
  Desired d;
  std::ostringstream err;
  ASSERT_TRUE(LoadManifestOrExplain(Manifest(pins), &d, err)) << err.str();
  auto o = Observe(d, "http://berth-offline.invalid");
  ASSERT_TRUE(o.ok()) << o.status().message();
  auto warnings = HubWarnings(*o);
  ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(o->warnings);
  const std::string& w = warnings[0];
  EXPECT_THAT(w, HasSubstr("cannot be reached"));
  EXPECT_THAT(w, HasSubstr("berth-offline.invalid"));
  EXPECT_THAT(w, HasSubstr("model/many at berth.lock's " + pins["many"].substr(0, 7) +
                           " (complete in the store)"));
  EXPECT_THAT(w, HasSubstr("model/tiny at berth.lock's " + pins["tiny"].substr(0, 7) +
                           " (complete in the store)"));
  EXPECT_THAT(w, HasSubstr("HF_HUB_OFFLINE=1"));
  EXPECT_EQ(w.find('\n'), std::string::npos) << "one line";
  EXPECT_TRUE(clock_.sleeps.empty());
  Plan p = MakePlan(d, *o);
  EXPECT_EQ(ModelActions(p), 0);
}

// The no-op apply that took 225 s: every API answer is a 503. The retries of the first question
// are bounded in time (10 s in all, on the fake clock), and then no other model asks.
TEST_F(OfflineHubTest, AHubAnswering503IsRetriedBrieflyOnceAndNotForEveryModel) {
  auto pins = PulledAndPinned();
  ASSERT_EQ(pins.size(), 2u);
  Desired d;
  std::ostringstream err;
  ASSERT_TRUE(LoadManifestOrExplain(Manifest(pins), &d, err)) << err.str();
  hub_->Fault(R"({"kind": "fail_5xx", "port": "api", "path": "/api/*"})");
  auto o = Observe(d, hub_->api());
  ASSERT_TRUE(o.ok()) << o.status().message();
  // Models are asked in name order: many first.
  int many = ApiRequests("/api/models/org/many/");
  int tiny = ApiRequests("/api/models/org/tiny/");
  EXPECT_GE(many, 2) << "a 503 is retried";
  EXPECT_LT(many, 8) << "but not for all 8 attempts: the budget ends it";
  EXPECT_EQ(tiny, 0) << "once the Hub gave up, the next model does not ask";
  EXPECT_LE(clock_.Elapsed(), std::chrono::seconds(10));
  auto warnings = HubWarnings(*o);
  ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(o->warnings);
  EXPECT_THAT(warnings[0], HasSubstr("did not answer"));
  EXPECT_THAT(warnings[0], HasSubstr("HTTP 503"));
  EXPECT_THAT(warnings[0], HasSubstr("model/tiny at berth.lock's"));
  EXPECT_EQ(ModelActions(MakePlan(d, *o)), 0);
}

TEST_F(OfflineHubTest, RenderAsksOnlyForTheModelOfTheServiceItRendersAndNoneWhenPinned) {
  ::setenv("HF_ENDPOINT", hub_->api().c_str(), 1);
  ::unsetenv("HF_HUB_OFFLINE");
  std::string manifest = Manifest({}, /*services=*/true);
  std::ostringstream out, err;
  ASSERT_EQ(RunRender(manifest, "", "svc-tiny", out, err), kExitOk) << err.str();
  EXPECT_GE(ApiRequests("/api/models/org/tiny/"), 1);
  EXPECT_EQ(ApiRequests("/api/models/org/many/"), 0) << "svc-many is not rendered";
  EXPECT_THAT(out.str(), HasSubstr("svc-tiny.service"));
  EXPECT_THAT(out.str(), Not(HasSubstr("svc-many.service")));

  // Pinned in berth.lock: the unit names the pin, whatever the Hub says; nothing is asked.
  const std::string pin = std::string(39, 'b') + "2";  // org/tiny's v1.0
  hub_->Reset();
  manifest = Manifest({{"tiny", pin}}, /*services=*/true);
  out.str("");
  err.str("");
  ASSERT_EQ(RunRender(manifest, "", "svc-tiny", out, err), kExitOk) << err.str();
  EXPECT_EQ(ApiRequests(), 0);
  EXPECT_THAT(out.str(), HasSubstr("snapshots/" + pin));
}

TEST_F(OfflineHubTest, BerthLockDatesItsEntriesByTheClock) {
  ::setenv("HF_ENDPOINT", hub_->api().c_str(), 1);
  LockCommand cmd;
  cmd.manifest_path = Manifest({});
  std::ostringstream out, err;
  ASSERT_EQ(RunLock(cmd, out, err, clock_), kExitOk) << err.str();
  std::ifstream in(work_ + "/manifests/berth.lock");
  std::ostringstream lock;
  lock << in.rdbuf();
  // The fake clock's wall time, unix 1'700'000'000; not the machine's.
  EXPECT_THAT(lock.str(), HasSubstr(R"("locked_at": "2023-11-14T22:13:20Z")"));
}

// A 300 MiB answer to a question whose real answer is a few kilobytes: refused once past the
// cap, not read to the end, never held in memory.
TEST_F(OfflineHubTest, AHugeRevisionAnswerIsRefusedPastItsCapAndNotReadToTheEnd) {
  hub_->Fault(R"({"kind": "huge_body", "path": "/api/models/org/tiny/revision/*"})");
  auto r = Pull("org/tiny");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("longer than 16 MiB"));
  EXPECT_THAT(r.status().message(), HasSubstr("is HF_ENDPOINT a Hugging Face Hub?"));
  uint64_t sent = 0;
  for (const auto& e : hub_->Log(10))
    if (e.value("path", "").find("/revision/") != std::string::npos)
      sent = std::max(sent, e.value("bytes_sent", uint64_t{0}));
  EXPECT_GT(sent, uint64_t{16} << 20);
  EXPECT_LT(sent, uint64_t{100} << 20) << "berth stopped reading at the cap";
  EXPECT_FALSE(fs::exists(store_ + "/models--org--tiny/blobs"));
}

TEST_F(OfflineHubTest, AHugeTreePageIsRefusedPastItsCap) {
  hub_->Fault(R"({"kind": "huge_body", "path": "/api/models/org/tiny/tree/*"})");
  auto r = Pull("org/tiny");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("longer than 32 MiB"));
  uint64_t sent = 0;
  for (const auto& e : hub_->Log(10))
    if (e.value("path", "").find("/tree/") != std::string::npos)
      sent = std::max(sent, e.value("bytes_sent", uint64_t{0}));
  EXPECT_LT(sent, uint64_t{150} << 20);
}

TEST_F(OfflineHubTest, APullThatDoesNotFitIsRefusedBeforeAByteIsFetched) {
  SpaceFs tight(1000);  // org/big is 2 MiB
  auto r = Pull("org/big", &tight);
  ASSERT_FALSE(r.ok());
  std::string m = r.status().message();
  EXPECT_THAT(m, HasSubstr("not enough free space for org/big@"));
  EXPECT_THAT(m, HasSubstr("needs 2.1 MB"));
  EXPECT_THAT(m, HasSubstr("has 1 kB free"));
  EXPECT_THAT(m, HasSubstr("nothing was downloaded"));
  EXPECT_THAT(m, HasSubstr("--store"));
  EXPECT_GE(tight.asked, 1);
  EXPECT_EQ(hub_->CdnBytes(), 0u);

  // Room for the model but not for the manifest's reserve as well.
  SpaceFs roomy(uint64_t{10} << 20);
  r = Pull("org/big", &roomy, uint64_t{9} << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("less the manifest's host.reserve of"));
  EXPECT_EQ(hub_->CdnBytes(), 0u);

  // Without the reserve it fits; once complete, a pull needs no space at all.
  r = Pull("org/big", &roomy);
  ASSERT_TRUE(r.ok()) << r.status().message();
  SpaceFs full(0);
  r = Pull("org/big", &full);
  EXPECT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(full.asked, 0) << "nothing to download: no free space needed";
}

// The downloader's retry schedule runs on the Clock seam: ten minutes of backoff pass on the
// fake clock, not on the wall.
TEST_F(OfflineHubTest, TheDownloadersBackoffWaitsOnTheClock) {
  opts_.backoff_ms = 600 * 1000;
  opts_.max_backoff_ms = 600 * 1000;
  hub_->Fault(
      R"({"kind": "fail_5xx", "count": 1, "method": "HEAD", "path": "/org/tiny/resolve/*"})");
  auto r = Pull("org/tiny");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->stats.retries, 1);
  EXPECT_GE(clock_.Elapsed(), std::chrono::minutes(10));
}

}  // namespace
}  // namespace berth::testing
