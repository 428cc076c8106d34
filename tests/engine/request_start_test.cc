// The starts a request makes of an on-demand server (socket activation), which no executor
// times: systemd's timestamps of the last start (LastStartMs), read by the observer
// (ObserveUnits), added to berth's start times once per invocation by a pass that writes state,
// and counted by the plan's "a first request waits" before that (issue 41).
#include "engine/state/state.h"
#include "providers/systemd/observe_units.h"
#include "tests/engine/reconciler_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(LastStartMs, OnlyACompletedStartOfAtMostADayHasATime) {
  EXPECT_EQ(LastStartMs(5'000'000, 8'200'000), 3200u);
  EXPECT_EQ(LastStartMs(5'000'000, 5'000'000), 0u);  // active at once (no ExecStartPost=)
  EXPECT_EQ(LastStartMs(5'000'000, 5'000'999), 0u);  // whole milliseconds
  // A start under way, or one that failed, entered no active state since it began.
  EXPECT_FALSE(LastStartMs(9'000'000, 8'200'000));
  EXPECT_FALSE(LastStartMs(0, 8'200'000));  // never started
  EXPECT_FALSE(LastStartMs(0, 0));
  // Past a day it is not a start berth takes for one.
  EXPECT_EQ(LastStartMs(1, 1 + kMaxStartMs * 1000), kMaxStartMs);
  EXPECT_FALSE(LastStartMs(1, 1 + (kMaxStartMs + 1) * 1000));
  EXPECT_FALSE(LastStartMs(1, UINT64_MAX));
}

// A systemd that answers the properties it is given.
class PropertiesOnly : public SystemdManager {
 public:
  std::vector<UnitProperties> units;
  Result<std::vector<UnitProperties>> GetUnits(const std::vector<std::string>& names) override {
    std::vector<UnitProperties> out;
    for (const std::string& n : names) {
      UnitProperties p;
      p.name = n;
      for (const UnitProperties& u : units)
        if (u.name == n) p = u;
      out.push_back(p);
    }
    return out;
  }
  Status Reload() override { return Status::Ok(); }
  Status Start(const std::string&, std::chrono::milliseconds) override { return Status::Ok(); }
  Status Stop(const std::string&, std::chrono::milliseconds) override { return Status::Ok(); }
  Status Restart(const std::string&, std::chrono::milliseconds) override { return Status::Ok(); }
  Status Enable(const std::string&) override { return Status::Ok(); }
  Status Disable(const std::string&) override { return Status::Ok(); }
};

TEST(ObserveUnitsLastStart, TheLastStartIsSystemdsMonotonicTimestampsOfItsInvocation) {
  PropertiesOnly systemd;
  auto unit = [](const std::string& name, uint64_t exit_us, uint64_t enter_us) {
    UnitProperties p;
    p.name = name;
    p.load_state = "loaded";
    p.active_state = "inactive";
    p.invocation_id = std::string(32, 'a');
    p.inactive_exit_monotonic_usec = exit_us;
    p.active_enter_monotonic_usec = enter_us;
    return p;
  };
  systemd.units = {unit("woken.service", 40'000'000, 43'200'000),
                   unit("starting.service", 50'000'000, 43'200'000), unit("never.service", 0, 0)};
  TempDir dir;
  auto got = ObserveUnits(systemd, UnitFileStore(dir.path()),
                          {"woken.service", "starting.service", "never.service"});
  ASSERT_TRUE(got.ok()) << got.status().message();
  Observed o;
  o.units = *got;
  EXPECT_EQ(o.FindUnit("woken.service")->last_start_ms, 3200u);
  EXPECT_EQ(o.FindUnit("woken.service")->invocation_id, std::string(32, 'a'));
  EXPECT_FALSE(o.FindUnit("starting.service")->last_start_ms);
  EXPECT_FALSE(o.FindUnit("never.service")->last_start_ms);
}

// The Reconciler on the in-memory host, with one on-demand service.
class RequestStartTest : public ReconcilerTest {
 protected:
  RequestStartTest() {
    dir.Write("chat/berth.yaml",
              "berth: 1\nhost: {store: /models}\nmodels:\n"
              "  kimi: {source: hf://moonshotai/Kimi-K2, revision: " +
                  kKimi +
                  ", size: 20GB}\n"
                  "services:\n"
                  "  chat:\n"
                  "    model: kimi\n"
                  "    engine: vllm\n"
                  "    gpus: [0]\n"
                  "    port: 8000\n"
                  "    bind: 127.0.0.1\n"
                  "    on_demand: true\n"
                  "    idle_stop: 30s\n"
                  "    server_port: 18000\n"
                  "    vllm: {gpu_memory_utilization: 0.9}\n"
                  "    health: {timeout: 10m, interval: 5s}\n");
  }
  // A request wakes the server; systemd timed its start at `ms`; it idles out again.
  void WokenByARequest(uint64_t ms) {
    world.host.Start("chat.service", world.desired);
    world.host.Unit("chat.service").last_start_ms = ms;
    world.host.Stop("chat.service");
  }
  // The start times state.json holds for the server, as the file says.
  std::string Recorded() {
    auto st = StateDir(dir / "state").Load();
    if (!st.ok()) return st.status().message();
    auto t = st->start_times_ms.find("chat.service");
    std::string times;
    for (uint64_t ms : t == st->start_times_ms.end() ? std::vector<uint64_t>{} : t->second)
      times += (times.empty() ? "" : ",") + std::to_string(ms);
    return times;
  }
};

TEST_F(RequestStartTest, AStartARequestMadeIsInThePlanAtOnceAndInTheStateOnceAfterAnApply) {
  ASSERT_EQ(Apply("chat").outcome, Outcome::kApplied) << out.str() << err.str();
  EXPECT_FALSE(Running("chat.service")) << "the plan never starts an on-demand server";
  EXPECT_EQ(Recorded(), "");
  ASSERT_EQ(Plan("chat").outcome, Outcome::kNoChanges) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("a first request waits no start recorded yet"));

  WokenByARequest(3200);
  // A plan counts it at once, and writes nothing.
  ASSERT_EQ(Plan("chat").outcome, Outcome::kNoChanges) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("a first request waits about 3200ms (its last start, which "
                                   "systemd timed)"));
  EXPECT_EQ(Recorded(), "");
  // An apply (a pass of the loop alike) records it; the next ones do not again.
  ASSERT_EQ(Apply("chat").outcome, Outcome::kNoChanges) << out.str() << err.str();
  EXPECT_EQ(Recorded(), "3200");
  ASSERT_EQ(Apply("chat").outcome, Outcome::kNoChanges) << out.str() << err.str();
  EXPECT_EQ(Recorded(), "3200");
  ASSERT_EQ(Plan("chat").outcome, Outcome::kNoChanges) << out.str();
  EXPECT_THAT(out.str(),
              HasSubstr("a first request waits about 3200ms (the median of 1 start berth "
                        "recorded)"));
  EXPECT_THAT(out.str(), Not(HasSubstr("systemd timed")));

  // The next request's start is another invocation: recorded too.
  WokenByARequest(2800);
  ASSERT_EQ(Apply("chat").outcome, Outcome::kNoChanges) << out.str() << err.str();
  EXPECT_EQ(Recorded(), "3200,2800");
}

}  // namespace
}  // namespace berth::testing
