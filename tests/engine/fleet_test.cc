// The fleet's rules (planners/fleet.h), a host's turn through an in-memory etcd
// (engine/fleet/fleet_turn.h), and the Reconciler taking that turn before anything goes dark.
// The same against a real etcd and sandboxed systemd is tests/e2e/fleet_e2e_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <utility>

#include "engine/fleet/fleet_turn.h"
#include "engine/output/fleet_view.h"
#include "planners/fleet.h"
#include "planners/planner.h"
#include "tests/engine/reconciler_fixture.h"
#include "tests/support/fake_etcd.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

FleetSpec Fleet(int max_unavailable = 1, bool waves = false) {
  FleetSpec f;
  f.name = "prod";
  f.endpoints = {"http://etcd-1:2379"};
  f.max_unavailable = max_unavailable;
  f.lease_ttl_ms = 3000;
  f.wait_ms = 60000;
  if (waves) f.waves = {{"canary", {"gpu-01"}, {}}, {"rest", {"gpu-*"}, {}}};
  return f;
}

const std::string kDigest = std::string(64, 'd');
const std::string kOldDigest = std::string(64, 'e');

FleetReport Report(const std::string& host, const std::string& state,
                   const std::string& digest = kDigest) {
  FleetReport r;
  r.host = host;
  r.state = state;
  r.digest = digest;
  r.updated_unix = 1'700'000'000;
  return r;
}

TEST(FleetRules, AHostIsInTheFirstWaveThatMatchesItAndAfterAllWavesWhenNoneDoes) {
  FleetSpec f = Fleet(1, true);
  EXPECT_EQ(WaveIndex(f, "gpu-01"), 0u);
  EXPECT_EQ(WaveIndex(f, "gpu-02"), 1u);
  EXPECT_EQ(WaveIndex(f, "cpu-01"), 2u);
  EXPECT_EQ(WaveName(f, 2), "(after all waves)");
  EXPECT_EQ(WaveIndex(Fleet(), "anything"), 0u);
}

TEST(FleetRules, ALaterWaveWaitsUntilEveryHostOfTheEarlierOnesConvergedOnThisManifest) {
  FleetSpec f = Fleet(1, true);
  // Nobody of the canary wave reported: wait.
  auto v = MayGoDark(f, "gpu-02", kDigest, {});
  EXPECT_EQ(v.kind, FleetTurnVerdict::kWait);
  EXPECT_THAT(v.why, HasSubstr("wave canary goes first, and no host of it has reported"));
  // The canary converged on the old manifest only: wait.
  v = MayGoDark(f, "gpu-02", kDigest, {Report("gpu-01", kFleetConverged, kOldDigest)});
  EXPECT_EQ(v.kind, FleetTurnVerdict::kWait);
  EXPECT_THAT(v.why, HasSubstr("gpu-01 runs manifest eeeeeeeeeeee (converged), not dddd"));
  // Switching now: wait.
  v = MayGoDark(f, "gpu-02", kDigest, {Report("gpu-01", kFleetSwitching)});
  EXPECT_EQ(v.kind, FleetTurnVerdict::kWait);
  // Converged on this one: go. The canary itself never waits for a wave.
  v = MayGoDark(f, "gpu-02", kDigest, {Report("gpu-01", kFleetConverged)});
  EXPECT_EQ(v.kind, FleetTurnVerdict::kGo);
  EXPECT_EQ(MayGoDark(f, "gpu-01", kDigest, {}).kind, FleetTurnVerdict::kGo);
  // Hosts of the same wave do not wait for each other (the slots bound them).
  EXPECT_EQ(MayGoDark(f, "gpu-03", kDigest,
                      {Report("gpu-01", kFleetConverged), Report("gpu-02", kFleetSwitching)})
                .kind,
            FleetTurnVerdict::kGo);
}

TEST(FleetRules, AHostThatFailedThisManifestStopsTheRolloutButNotTheNextManifest) {
  FleetSpec f = Fleet();
  auto v = MayGoDark(f, "gpu-02", kDigest, {Report("gpu-01", kFleetFailed)});
  EXPECT_EQ(v.kind, FleetTurnVerdict::kStop);
  EXPECT_THAT(v.why, HasSubstr("failed on gpu-01"));
  EXPECT_THAT(v.why, HasSubstr("until the manifest changes"));
  EXPECT_EQ(MayGoDark(f, "gpu-02", kDigest, {Report("gpu-01", kFleetFailed, kOldDigest)}).kind,
            FleetTurnVerdict::kGo);
}

TEST(FleetRules, TheFirstDisruptiveStepIsTheFirstStopOrRestart) {
  Plan p;
  for (ActionKind k : {ActionKind::kDownload, ActionKind::kWriteUnit, ActionKind::kDaemonReload,
                       ActionKind::kStop, ActionKind::kStart, ActionKind::kWaitHealthy}) {
    Action a = MakeAction(k);
    p.actions.push_back(a);
  }
  MarkTurnsAndGroups(&p);
  EXPECT_EQ(FirstDisruptiveStep(p), std::optional<size_t>(3));
  p.actions.resize(3);
  EXPECT_EQ(FirstDisruptiveStep(p), std::nullopt);
}

TEST(FleetReportJson, ReportsRoundTripAndHostileOnesAreRefusedWithTheirKey) {
  FleetReport r = Report("gpu-01", kFleetConverged);
  r.start_to_healthy_ms["a.service"] = 1234;
  r.floor_figures["a.service"] = "1180 output tok/s at concurrency 32";
  r.reference_figures["b.service"] = "1000 output tok/s at concurrency 32";
  auto back = FleetReportFromJson(FleetReportToJson(r), "k");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->start_to_healthy_ms["a.service"], 1234u);
  EXPECT_EQ(back->floor_figures, r.floor_figures);
  EXPECT_EQ(back->reference_figures, r.reference_figures);
  for (const char* bad :
       {"", "[]", "{\"host\": \"../../etc\", \"digest\": \"dd\", \"state\": \"converged\"}",
        "{\"host\": \"h\", \"digest\": \"dd\", \"state\": \"owned\"}",
        "{\"host\": \"h\", \"digest\": \"zz\", \"state\": \"converged\"}",
        "{\"host\": \"h\", \"digest\": \"dd\", \"state\": \"converged\", \"services_up\": -1}",
        "{\"host\": \"h\", \"digest\": \"dd\", \"state\": \"converged\", "
        "\"reference_figures\": {\"a\": 5}}",
        "{\"host\": 7}"}) {
    auto p = FleetReportFromJson(bad, "/berth/fleets/prod/hosts/h");
    EXPECT_FALSE(p.ok()) << bad;
    if (!p.ok()) {
      EXPECT_THAT(p.status().message(), HasSubstr("/berth/fleets/prod/hosts/h"));
    }
  }
  // Control bytes in a message never reach the terminal.
  auto esc = FleetReportFromJson(
      "{\"host\": \"h\", \"digest\": \"dd\", \"state\": \"failed\", \"message\": \"a\\u001b[2Jb\"}",
      "k");
  ASSERT_TRUE(esc.ok());
  EXPECT_EQ(esc->message, "a [2Jb");
}

// A failed switch's error: its first line, then the unit's journal, 15 lines.
std::string FailedSwitchMessage() {
  std::string m =
      "\n  service/minimax: vllm-minimax.service did not become healthy within 10m\n"
      "journal of vllm-minimax.service (last 15 lines):\n";
  for (int i = 0; i < 15; ++i) m += "  Dec 01 03:0" + std::to_string(i % 10) + " vllm[42]: line\n";
  return m;
}

TEST(FleetMessageLine, TheFirstMeaningfulLineCutOnACharacterBoundary) {
  EXPECT_EQ(FleetMessageLine(FailedSwitchMessage()),
            "service/minimax: vllm-minimax.service did not become healthy within 10m …");
  EXPECT_EQ(FleetMessageLine("holds /berth/fleets/prod/slots/0"),
            "holds /berth/fleets/prod/slots/0");
  EXPECT_EQ(FleetMessageLine(""), "");
  EXPECT_EQ(FleetMessageLine(" \n\t\n"), "");
  // "é" is two bytes: a cut never splits it.
  std::string cut = FleetMessageLine("aé" + std::string(50, 'x'), 5);
  EXPECT_EQ(cut, "a…");
  cut = FleetMessageLine("aéé" + std::string(50, 'x'), 7);
  EXPECT_EQ(cut, "aé…");
  cut = FleetMessageLine("aéé" + std::string(50, 'x'), 8);
  EXPECT_EQ(cut, "aéé…");
  EXPECT_EQ(FleetMessageLine("tab\there"), "tab here");
}

TEST(FleetReportJson, AFailedSwitchsWholeErrorStaysInTheReportAndALongOneIsCut) {
  FleetReport r = Report("gpu-01", kFleetFailed);
  r.message = FailedSwitchMessage();
  auto back = FleetReportFromJson(FleetReportToJson(r), "k");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->message, r.message) << "its lines are kept";
  // An error longer than a report may carry is cut (on a character boundary), not refused.
  r.message = std::string(4095, 'x') + "é and more";
  back = FleetReportFromJson(FleetReportToJson(r), "k");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->message, std::string(4095, 'x'));
}

TEST(FleetRules, AnotherHostsFailureIsOneLineInTheVerdict) {
  FleetSpec f = Fleet(1, false);
  FleetReport failed = Report("gpu-01", kFleetFailed);
  failed.message = FailedSwitchMessage();
  FleetTurnVerdict v = MayGoDark(f, "gpu-02", kDigest, {failed});
  ASSERT_EQ(v.kind, FleetTurnVerdict::kStop);
  EXPECT_THAT(v.why, HasSubstr("failed on gpu-01 (service/minimax: vllm-minimax.service did not "
                               "become healthy within 10m …)"));
  EXPECT_EQ(v.why.find('\n'), std::string::npos) << v.why;
  EXPECT_THAT(v.why, Not(HasSubstr("journal of")));
}

class FleetTurnTest : public ::testing::Test {
 protected:
  FleetTurnOptions Options(const std::string& host, Clock* c = nullptr) {
    FleetTurnOptions o;
    o.host = host;
    o.digest = kDigest;
    o.clock = c ? c : &clock;
    o.poll = std::chrono::milliseconds(1000);
    return o;
  }
  FakeEtcd etcd;
  FakeClock clock;
};

TEST_F(FleetTurnTest, NoMoreHostsHoldASlotAtOnceThanMaxUnavailableAndEachGetsItsTurn) {
  FleetSpec f = Fleet(2);
  std::atomic<int> dark{0}, most{0}, turns{0};
  std::vector<std::thread> hosts;
  for (int h = 0; h < 6; ++h) {
    hosts.emplace_back([&, h] {
      FleetTurnOptions o = Options("gpu-0" + std::to_string(h), &RealClock());
      o.poll = std::chrono::milliseconds(1);
      FleetTurn turn(f, &etcd, o);
      Status s = turn.Acquire();
      if (!s.ok()) return;
      int now = ++dark;
      for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      --dark;
      ++turns;
      turn.Release();
    });
  }
  for (auto& t : hosts) t.join();
  EXPECT_EQ(turns.load(), 6);
  EXPECT_LE(most.load(), 2);
  EXPECT_LE(etcd.max_slots_held(), 2);
  EXPECT_GE(etcd.max_slots_held(), 1);
  for (const auto& [k, v] : etcd.kv()) EXPECT_EQ(k.find("/slots/"), std::string::npos) << k;
}

// A report that says what etcd already holds is not written again (a no-op pass costs etcd a
// read, not a write), until the one there is kFleetReportRefreshSeconds old; a change of state
// is written at once.
TEST_F(FleetTurnTest, AnUnchangedReportIsWrittenAgainOnlyOnceItIsOld) {
  FleetSpec f = Fleet(1);
  FleetTurn turn(f, &etcd, Options("gpu-01"));
  auto puts = [&] {
    int n = 0;
    for (const std::string& c : etcd.calls()) n += c.starts_with("put ");
    return n;
  };
  FleetReport converged;
  converged.state = kFleetConverged;
  ASSERT_TRUE(turn.Publish(converged).ok());
  EXPECT_EQ(puts(), 1);
  clock.Advance(std::chrono::seconds(kFleetReportRefreshSeconds - 1));
  ASSERT_TRUE(turn.Publish(converged).ok());
  EXPECT_EQ(puts(), 1) << "the same report, 9 minutes later: not written";
  clock.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(turn.Publish(converged).ok());
  EXPECT_EQ(puts(), 2) << "10 minutes old: written again, as a sign of life";
  FleetReport failed = converged;
  failed.state = kFleetFailed;
  ASSERT_TRUE(turn.Publish(failed).ok());
  EXPECT_EQ(puts(), 3) << "a new state is written at once";
  auto kv = etcd.kv();
  auto r = FleetReportFromJson(kv.at("/berth/fleets/prod/hosts/gpu-01").value, "k");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, kFleetFailed);
}

// The keep-alive renews the slot's lease every third of its TTL of the turn's clock, and only
// then: three renewals per TTL. etcd unreachable for longer than the TTL, the lease is lost.
TEST_F(FleetTurnTest, TheKeepAliveRenewsTheLeaseThreeTimesPerTtlOfTheTurnsClock) {
  FleetSpec f = Fleet(1);  // a TTL of 3 s
  FleetTurn turn(f, &etcd, Options("gpu-01"));
  ASSERT_TRUE(turn.Acquire().ok());
  auto renewals = [&] { return std::ranges::count(etcd.calls(), std::string("keepalive")); };
  // In steps of 100 ms; after each, the keep-alive waits again before time moves on.
  auto pass = [&](std::chrono::milliseconds time) {
    for (auto t = std::chrono::milliseconds(0); t < time; t += std::chrono::milliseconds(100)) {
      ASSERT_TRUE(clock.AwaitWaiters(1)) << "no keep-alive waits on the turn's clock";
      clock.Advance(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(clock.AwaitWaiters(1));
  };
  pass(std::chrono::milliseconds(2900));
  EXPECT_EQ(renewals(), 2);
  pass(std::chrono::milliseconds(100));
  EXPECT_EQ(renewals(), 3);
  pass(std::chrono::seconds(6));
  EXPECT_EQ(renewals(), 9);
  EXPECT_FALSE(turn.lease_lost());
  etcd.SetDown(true);
  pass(std::chrono::seconds(3));
  EXPECT_FALSE(turn.lease_lost()) << "unrenewed for 3 s, the TTL: not lost yet";
  pass(std::chrono::seconds(1));
  EXPECT_TRUE(turn.lease_lost());
}

// A watch that fails makes the wait fall back to reading the fleet every poll, doubling to
// 8 × poll, and says so once.
TEST_F(FleetTurnTest, ABrokenWatchFallsBackToPollingWithBackoffAndSaysSo) {
  FleetSpec f = Fleet(1);
  FleetTurn holder(f, &etcd, Options("gpu-02"));
  ASSERT_TRUE(holder.Acquire().ok());
  etcd.SetBrokenWatch(true);
  FleetTurnOptions o = Options("gpu-01");
  std::vector<std::string> said;
  o.say = [&](const std::string& line) { said.push_back(line); };
  FleetTurn waiter(f, &etcd, o);
  Status s = waiter.Acquire();
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("waited 60s (fleet.wait) for a turn"));
  int falls = 0;
  for (const std::string& line : said)
    falls += line.find(
                 "watching etcd failed (etcd http://etcd-1:2379 watch: the server ended "
                 "the stream); polling instead") != std::string::npos;
  EXPECT_EQ(falls, 1) << ::testing::PrintToString(said);
  ASSERT_GE(clock.sleeps.size(), 5u);
  EXPECT_EQ(clock.sleeps[0], std::chrono::seconds(1));
  EXPECT_EQ(clock.sleeps[1], std::chrono::seconds(2));
  EXPECT_EQ(clock.sleeps[2], std::chrono::seconds(4));
  EXPECT_EQ(clock.sleeps[3], std::chrono::seconds(8));
  EXPECT_EQ(clock.sleeps[4], std::chrono::seconds(8));
}

TEST_F(FleetTurnTest, AHostWaitsWhileTheSlotIsHeldAndGoesOnceItsLeaseExpires) {
  FleetSpec f = Fleet(1);
  FleetTurn first(f, &etcd, Options("gpu-01"));
  ASSERT_TRUE(first.Acquire().ok());
  int64_t lease = etcd.kv().at("/berth/fleets/prod/slots/0").lease;
  // gpu-01 is killed -9 mid-switch: nothing releases; its lease expires after the TTL.
  clock.on_sleep = [&](std::chrono::milliseconds elapsed) {
    if (elapsed >= std::chrono::seconds(5)) etcd.Expire(lease);
  };
  std::vector<std::string> said;
  FleetTurnOptions o = Options("gpu-02");
  o.say = [&](const std::string& l) { said.push_back(l); };
  FleetTurn second(f, &etcd, o);
  ASSERT_TRUE(second.Acquire().ok());
  EXPECT_TRUE(second.holding());
  EXPECT_GE(clock.Elapsed(), std::chrono::seconds(5));
  ASSERT_FALSE(said.empty());
  EXPECT_THAT(said[0], HasSubstr("waiting: all 1 slot is held (max_unavailable 1): by gpu-01"));
  auto report = FleetReportFromJson(etcd.kv().at("/berth/fleets/prod/hosts/gpu-02").value, "k");
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->state, kFleetSwitching);
}

TEST_F(FleetTurnTest, ALeaseThatExpiredWhileWaitingIsReplacedAndTheTurnStillComes) {
  FleetSpec f = Fleet(1);
  FleetTurn first(f, &etcd, Options("gpu-01"));
  ASSERT_TRUE(first.Acquire().ok());
  int64_t held = etcd.kv().at("/berth/fleets/prod/slots/0").lease;
  FleetTurn second(f, &etcd, Options("gpu-02"));
  // The second host's lease (the next one granted) expires first, then the holder's.
  clock.on_sleep = [&](std::chrono::milliseconds elapsed) {
    if (elapsed >= std::chrono::seconds(2)) etcd.Expire(held + 1);
    if (elapsed >= std::chrono::seconds(6)) etcd.Expire(held);
  };
  ASSERT_TRUE(second.Acquire().ok());
  int64_t now = etcd.kv().at("/berth/fleets/prod/slots/0").lease;
  EXPECT_GT(now, held + 1);  // a new lease, not the expired one
}

TEST_F(FleetTurnTest, WithEtcdUnreachableNoTurnIsGivenAndTheErrorSaysNothingWentDark) {
  etcd.SetDown(true);
  FleetSpec f = Fleet();
  FleetTurn turn(f, &etcd, Options("gpu-01"));
  Status s = turn.Acquire();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("etcd cannot be reached"));
  EXPECT_THAT(s.message(), HasSubstr("no service was taken down"));
  EXPECT_FALSE(turn.holding());
}

TEST_F(FleetTurnTest, WaitingLongerThanFleetWaitFailsWithWhatItWaitedFor) {
  FleetSpec f = Fleet(1, true);
  f.wait_ms = 10000;
  FleetTurn turn(f, &etcd, Options("gpu-02"));
  Status s = turn.Acquire();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("waited 10s (fleet.wait) for a turn: wave canary goes first"));
  EXPECT_EQ(clock.Elapsed(), std::chrono::seconds(10));
}

TEST_F(FleetTurnTest, ASlotLeftByAnEarlierBerthOfThisHostIsTakenOver) {
  FleetSpec f = Fleet(1);
  auto old_lease = etcd.GrantLease(std::chrono::seconds(30));
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/slots/0",
                       FleetSlotToJson({"gpu-01", kDigest, 1'700'000'000}), *old_lease)
                  .ok());
  FleetTurn turn(f, &etcd, Options("gpu-01"));
  ASSERT_TRUE(turn.Acquire().ok());
  EXPECT_NE(etcd.kv().at("/berth/fleets/prod/slots/0").lease, *old_lease);
  turn.Release();
  EXPECT_EQ(etcd.kv().count("/berth/fleets/prod/slots/0"), 0u);
}

// gpu-01 holds the turn and its lease expires while it is dark (etcd unreachable longer than the
// TTL); gpu-02 takes the slot. Asked again before gpu-01 takes another service down, Take()
// finds the turn lost and waits until gpu-02 gives it back: never two hosts dark at once.
TEST_F(FleetTurnTest, ATurnLostWhileHeldIsTakenAgainBeforeGoingOn) {
  FleetSpec f = Fleet(1);
  std::vector<std::string> said;
  FleetTurnOptions o = Options("gpu-01");
  o.say = [&](const std::string& l) { said.push_back(l); };
  FleetTurn first(f, &etcd, o);
  ASSERT_TRUE(first.Acquire().ok());
  etcd.Expire(etcd.kv().at("/berth/fleets/prod/slots/0").lease);
  FleetTurn second(f, &etcd, Options("gpu-02"));
  ASSERT_TRUE(second.Acquire().ok());
  clock.on_sleep = [&](std::chrono::milliseconds elapsed) {
    if (elapsed >= std::chrono::seconds(20)) second.Release();
  };
  ASSERT_TRUE(first.Acquire().ok());
  EXPECT_GE(clock.Elapsed(), std::chrono::seconds(20)) << "it waited for gpu-02's turn to end";
  EXPECT_TRUE(first.holding());
  EXPECT_EQ(etcd.max_slots_held(), 1);
  auto slot = FleetSlotFromJson(etcd.kv().at("/berth/fleets/prod/slots/0").value, "k");
  ASSERT_TRUE(slot.ok());
  EXPECT_EQ(slot->host, "gpu-01");
  EXPECT_THAT(said, ::testing::Contains(HasSubstr("this host's turn is lost")));
  // Still held: Take() says so at once.
  auto now = clock.Elapsed();
  ASSERT_TRUE(first.Acquire().ok());
  EXPECT_EQ(clock.Elapsed(), now);
  // etcd unreachable: the turn cannot be shown held, so it is not (nothing more goes dark).
  etcd.SetDown(true);
  Status s = first.Acquire();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("etcd cannot be reached"));
}

TEST_F(FleetTurnTest, UnreadableReportsAreLeftOutWithAWarningNamingTheKey) {
  FleetSpec f = Fleet();
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-09", "{not json").ok());
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-08",
                       FleetReportToJson(Report("gpu-07", kFleetConverged)))
                  .ok());
  std::vector<std::string> warnings;
  auto reports = ReadFleetReports(etcd, f, &warnings);
  ASSERT_TRUE(reports.ok());
  EXPECT_TRUE(reports->empty());
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/x\x1b[2Jy", "{}").ok());
  warnings.clear();
  reports = ReadFleetReports(etcd, f, &warnings);
  ASSERT_EQ(warnings.size(), 3u);
  // A key is any bytes: it never reaches the terminal raw.
  EXPECT_THAT(warnings[2], HasSubstr("hosts/x\\x1b[2Jy"));
  EXPECT_THAT(warnings[0], HasSubstr("hosts/gpu-08 names another host, gpu-07"));
  EXPECT_THAT(warnings[1], HasSubstr("hosts/gpu-09"));
}

// One writer's oversized keys under the fleet's prefix (17 of 1 MiB) neither stall the fleet
// nor are read into memory: each is left out with a warning naming it, the real reports count,
// and a host waiting for its turn still gets it.
TEST_F(FleetTurnTest, OversizedReportsAreLeftOutByNameAndTheTurnStillComes) {
  FleetSpec f = Fleet();
  for (int i = 0; i < 17; ++i)
    ASSERT_TRUE(
        etcd.Put("/berth/fleets/prod/hosts/big-" + std::to_string(i), std::string(1 << 20, '{'))
            .ok());
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-01",
                       FleetReportToJson(Report("gpu-01", kFleetConverged)))
                  .ok());
  std::vector<std::string> warnings;
  auto reports = ReadFleetReports(etcd, f, &warnings);
  ASSERT_TRUE(reports.ok()) << reports.status().message();
  ASSERT_EQ(reports->size(), 1u);
  EXPECT_EQ((*reports)[0].host, "gpu-01");
  ASSERT_EQ(warnings.size(), 17u);
  EXPECT_THAT(warnings[0], HasSubstr("the fleet report at /berth/fleets/prod/hosts/big-0 is "
                                     "larger than 64 KiB, which no berth writes: it is left out"));
  FleetTurn turn(f, &etcd, Options("gpu-02"));
  EXPECT_TRUE(turn.Acquire().ok());
  turn.Release();
}

TEST_F(FleetTurnTest, ForgettingAHostDeletesItsReportAndNothingElse) {
  FleetSpec f = Fleet(1, true);
  f.waves[0].hosts = {"gpu-01", "gpu-09"};
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-01",
                       FleetReportToJson(Report("gpu-01", kFleetConverged, kOldDigest)))
                  .ok());
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-09",
                       FleetReportToJson(Report("gpu-09", kFleetConverged)))
                  .ok());
  // gpu-01 left the fleet: its old report keeps gpu-02 waiting until it is forgotten.
  auto reports = ReadFleetReports(etcd, f);
  ASSERT_TRUE(reports.ok());
  EXPECT_EQ(MayGoDark(f, "gpu-02", kDigest, *reports).kind, FleetTurnVerdict::kWait);
  ASSERT_TRUE(ForgetFleetHost(etcd, f, "gpu-01").ok());
  reports = ReadFleetReports(etcd, f);
  ASSERT_TRUE(reports.ok());
  EXPECT_EQ(MayGoDark(f, "gpu-02", kDigest, *reports).kind, FleetTurnVerdict::kGo);
  EXPECT_EQ(etcd.kv().count("/berth/fleets/prod/hosts/gpu-01"), 0u);
  Status again = ForgetFleetHost(etcd, f, "gpu-01");
  EXPECT_EQ(again.code(), Status::Code::kNotFound);
  EXPECT_THAT(again.message(), HasSubstr("has no report of gpu-01"));
  EXPECT_EQ(ForgetFleetHost(etcd, f, "../slots/0").code(), Status::Code::kInvalidArgument);
}

TEST(FleetViewTest, TheTextShowsEachHostsWaveStateAndWhoHoldsTheSlot) {
  FleetSpec f = Fleet(1, true);
  std::vector<FleetReport> reports = {Report("gpu-02", kFleetSwitching),
                                      Report("gpu-01", kFleetConverged),
                                      Report("gpu-03", kFleetWaiting, kOldDigest)};
  reports[2].message = "wave canary goes first";
  FleetView v = MakeFleetView(f, kDigest, reports,
                              {{"/berth/fleets/prod/slots/0", {"gpu-02", kDigest, 1'700'000'000}}},
                              {}, 1'700'000'030);
  std::string text = FleetViewText(v);
  EXPECT_THAT(text, HasSubstr("fleet prod: 3 hosts reported, 1 converged on this manifest"));
  EXPECT_THAT(text, HasSubstr("1 of 1 slot held"));
  // Canary first, then by name.
  EXPECT_LT(text.find("gpu-01"), text.find("gpu-02"));
  EXPECT_THAT(text, HasSubstr("switching *"));
  EXPECT_THAT(text, HasSubstr("eeeeeeeeeeee (other)"));
  EXPECT_THAT(text, HasSubstr("* /berth/fleets/prod/slots/0 held by gpu-02 since 30s ago"));
  std::string json = FleetViewJson(v);
  EXPECT_THAT(json, HasSubstr("\"holds_slot\": true"));
}

TEST(FleetViewTest, AFailedSwitchIsOneLineInTheTableAndWholeInTheJson) {
  FleetSpec f = Fleet(1, false);
  std::vector<FleetReport> reports = {Report("gpu-01", kFleetFailed),
                                      Report("gpu-02", kFleetConverged)};
  reports[0].message = FailedSwitchMessage();
  FleetView v = MakeFleetView(f, kDigest, reports, {}, {}, 1'700'000'030);
  std::string text = FleetViewText(v);
  EXPECT_THAT(text, Not(HasSubstr("journal of")));
  size_t row = text.find("gpu-01");
  ASSERT_NE(row, std::string::npos) << text;
  std::string line = text.substr(row, text.find('\n', row) - row);
  EXPECT_THAT(line, HasSubstr("did not become healthy within 10m …"));
  EXPECT_LT(text.find("gpu-02"), text.size()) << "the next host is on its own row";
  EXPECT_EQ(text.find("gpu-02", row) - row, line.size() + 1) << text;
  std::string json = FleetViewJson(v);
  EXPECT_THAT(json, HasSubstr("journal of vllm-minimax.service (last 15 lines):\\n"));
}

// The Reconciler: MiniMax replaces Kimi on GPU 0 (stop Kimi, start MiniMax), in fleet "prod".
class FleetReconcilerTest : public ReconcilerTest {
 protected:
  FleetReconcilerTest() {
    std::string fleet =
        "fleet:\n  name: prod\n  etcd: {endpoints: [\"http://etcd-1:2379\"]}\n"
        "  wait: 1m\n  waves:\n    - {name: canary, hosts: [gpu-00]}\n"
        "    - {name: rest, hosts: [\"gpu-*\"]}\n";
    dir.Write("fleet-kimi/berth.yaml", Manifest(false) + fleet);
    dir.Write("fleet-minimax/berth.yaml", Manifest(true) + fleet);
    dir.Write("fleet-floor/berth.yaml",
              Manifest(true) +
                  "    gates:\n      floor: {concurrency: 4, duration: 10s, output_tps: 10}\n" +
                  fleet);
  }
  RunReport FleetApply(const std::string& manifest) {
    out.str("");
    err.str("");
    Reporter say(out, err, PlanFormat::kText);
    ReconcileOptions o;
    o.manifest_path = dir / (manifest + "/berth.yaml");
    o.state_dir = dir / "state";
    o.apply = true;
    o.yes = true;
    o.stop = &stop;
    ReconcilerDeps d = world.Deps(&say);
    d.hostname = [] { return std::string("gpu-01"); };
    d.connect_etcd = [this](const FleetSpec&) -> Result<std::unique_ptr<Etcd>> {
      return std::unique_ptr<Etcd>(std::make_unique<EtcdView>(&etcd));
    };
    return Reconciler(d).Run(o);
  }
  std::optional<FleetReport> Published(const std::string& host) {
    auto kv = etcd.kv();
    auto it = kv.find("/berth/fleets/prod/hosts/" + host);
    if (it == kv.end()) return std::nullopt;
    auto r = FleetReportFromJson(it->second.value, it->first);
    return r.ok() ? std::optional<FleetReport>(*r) : std::nullopt;
  }
  // alpha and beta, both on GPU 0 (so restarted one after the other), in fleet "prod";
  // `args` added to each.
  std::string TwoServices(const std::string& args) {
    std::string m =
        "berth: 1\nhost: {store: /models}\nmodels:\n  kimi: {source: "
        "hf://moonshotai/Kimi-K2, revision: " +
        kKimi + ", size: 20GB}\nservices:\n";
    for (const auto& [name, port] : {std::pair<std::string, int>{"alpha", 8000}, {"beta", 8001}})
      m += "  " + name + ":\n    model: kimi\n    engine: vllm\n    gpus: [0]\n    port: " +
           std::to_string(port) +
           "\n    vllm: {gpu_memory_utilization: 0.4}\n    health: {timeout: 10m, interval: 5s}\n" +
           args;
    return m +
           "fleet:\n  name: prod\n  etcd: {endpoints: [\"http://etcd-1:2379\"]}\n  wait: 1m\n"
           "  waves:\n    - {name: canary, hosts: [gpu-00]}\n    - {name: rest, hosts: "
           "[\"gpu-*\"]}\n";
  }
  // The pass owns its client; they all share this one etcd.
  struct EtcdView : Etcd {
    explicit EtcdView(FakeEtcd* fake) : e(fake) {}
    Result<std::vector<EtcdKv>> Range(const std::string& p, int64_t l, size_t max,
                                      int64_t* revision) override {
      return e->Range(p, l, max, revision);
    }
    Result<std::optional<EtcdKv>> Get(const std::string& k) override { return e->Get(k); }
    Status Put(const std::string& k, const std::string& v, int64_t l) override {
      return e->Put(k, v, l);
    }
    Result<bool> CreateIfAbsent(const std::string& k, const std::string& v, int64_t l,
                                EtcdKv* x) override {
      return e->CreateIfAbsent(k, v, l, x);
    }
    Result<bool> DeleteIfLease(const std::string& k, int64_t l) override {
      return e->DeleteIfLease(k, l);
    }
    Status Delete(const std::string& k) override { return e->Delete(k); }
    Result<int64_t> GrantLease(std::chrono::seconds t) override { return e->GrantLease(t); }
    Result<int64_t> KeepAlive(int64_t l) override { return e->KeepAlive(l); }
    Status Revoke(int64_t l) override { return e->Revoke(l); }
    FakeEtcd* e;
  };
  FakeEtcd etcd;
};

TEST_F(FleetReconcilerTest, WithEtcdDownTheDownloadRunsButNothingGoesDarkUntilEtcdIsBack) {
  ASSERT_EQ(ExitCodeOf(FleetApply("fleet-kimi").outcome), 0) << err.str();
  ASSERT_EQ(Published("gpu-01")->state, kFleetConverged);
  // gpu-00, the canary, converged on the MiniMax manifest already.
  std::string digest = Plan("fleet-minimax").manifest_digest;
  FleetReport canary = Report("gpu-00", kFleetConverged, digest);
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-00", FleetReportToJson(canary)).ok());

  etcd.SetDown(true);
  RunReport r = FleetApply("fleet-minimax");
  EXPECT_EQ(ExitCodeOf(r.outcome), 1);
  EXPECT_FALSE(r.terminal);
  EXPECT_THAT(err.str(), HasSubstr("etcd cannot be reached"));
  EXPECT_THAT(err.str(), HasSubstr("none took a service down"));
  EXPECT_EQ(Count("download MiniMaxAI/MiniMax-M2"), 1u);
  EXPECT_EQ(Count("stop vllm-kimi.service"), 0u);
  EXPECT_TRUE(Running("vllm-kimi.service"));

  etcd.SetDown(false);
  r = FleetApply("fleet-minimax");
  EXPECT_EQ(ExitCodeOf(r.outcome), 0) << err.str();
  EXPECT_EQ(Count("stop vllm-kimi.service"), 1u);
  EXPECT_TRUE(Running("vllm-minimax.service"));
  EXPECT_EQ(Published("gpu-01")->state, kFleetConverged);
  EXPECT_EQ(Published("gpu-01")->digest, digest);
  EXPECT_EQ(etcd.max_slots_held(), 1);
  for (const auto& [k, v] : etcd.kv()) EXPECT_EQ(k.find("/slots/"), std::string::npos) << k;
}

TEST_F(FleetReconcilerTest, TheReportCarriesTheGateFiguresAndKeepsThemWhileNothingChanges) {
  ASSERT_EQ(ExitCodeOf(FleetApply("fleet-kimi").outcome), 0) << err.str();
  std::string digest = Plan("fleet-floor").manifest_digest;
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-00",
                       FleetReportToJson(Report("gpu-00", kFleetConverged, digest)))
                  .ok());
  ASSERT_EQ(ExitCodeOf(FleetApply("fleet-floor").outcome), 0) << err.str();
  for (int pass = 0; pass < 2; ++pass) {  // the switch, then a pass with nothing to do
    auto mine = Published("gpu-01");
    ASSERT_TRUE(mine);
    EXPECT_EQ(mine->state, kFleetConverged);
    EXPECT_THAT(mine->floor_figures["vllm-minimax.service"],
                HasSubstr("1000 output tok/s at concurrency 4"));
    EXPECT_EQ(mine->start_to_healthy_ms.count("vllm-minimax.service"), 1u);
    EXPECT_EQ(mine->services_up, 1);
    if (pass == 0) {
      ASSERT_EQ(FleetApply("fleet-floor").outcome, Outcome::kNoChanges);
    }
  }
}

TEST_F(FleetReconcilerTest, ThePlanSaysWhichStepWaitsForTheHostsTurn) {
  ASSERT_EQ(ExitCodeOf(FleetApply("fleet-kimi").outcome), 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("fleet prod: nothing here goes dark; no turn needed"));
  Plan("fleet-minimax");
  EXPECT_THAT(out.str(), HasSubstr("fleet prod: step 4 waits for this host's turn (at most 1 "
                                   "host dark at once; wave rest); the steps before it do not"));
}

TEST_F(FleetReconcilerTest, TheRestWaitsForTheCanaryAndAFailedCanaryStopsTheRollout) {
  ASSERT_EQ(ExitCodeOf(FleetApply("fleet-kimi").outcome), 0) << err.str();
  std::string digest = Plan("fleet-minimax").manifest_digest;
  // The canary is still switching: gpu-01 waits its whole fleet.wait, then fails (retried).
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-00",
                       FleetReportToJson(Report("gpu-00", kFleetSwitching, digest)))
                  .ok());
  RunReport r = FleetApply("fleet-minimax");
  EXPECT_EQ(ExitCodeOf(r.outcome), 1);
  EXPECT_THAT(err.str(), HasSubstr("waited 60s (fleet.wait) for a turn: wave canary goes first: "
                                   "gpu-00 is switching at this manifest"));
  EXPECT_EQ(Count("stop vllm-kimi.service"), 0u);
  EXPECT_EQ(Published("gpu-01")->state, kFleetWaiting);
  // The canary failed: gpu-01 stops at once and says who failed.
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-00",
                       FleetReportToJson(Report("gpu-00", kFleetFailed, digest)))
                  .ok());
  r = FleetApply("fleet-minimax");
  EXPECT_EQ(ExitCodeOf(r.outcome), 1);
  EXPECT_THAT(err.str(), HasSubstr("stopped: it failed on gpu-00"));
  EXPECT_EQ(Count("stop vllm-kimi.service"), 0u);
  EXPECT_TRUE(Running("vllm-kimi.service"));
}

// A host whose service crash-loops after its switch is not converged: it reports
// crash-looping, and the next host does not take its service down for that manifest.
TEST_F(FleetReconcilerTest, ACrashLoopingServiceIsPublishedAsCrashLoopingAndStopsTheRollout) {
  ASSERT_EQ(ExitCodeOf(FleetApply("fleet-kimi").outcome), 0) << err.str();
  ObservedUnit& u = world.host.Unit("vllm-kimi.service");
  u.active_state = "activating";
  u.sub_state = "auto-restart";
  u.n_restarts = 2;
  RunReport r = FleetApply("fleet-kimi");
  EXPECT_EQ(r.outcome, Outcome::kNoChanges) << err.str();
  auto mine = Published("gpu-01");
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->state, kFleetCrashLooping);
  EXPECT_EQ(mine->services_up, 0);
  EXPECT_EQ(mine->message,
            "crash-looping: vllm-kimi (restarted 2 times by systemd, now activating/auto-restart)");
  auto v = MayGoDark(Fleet(), "gpu-02", mine->digest, {*mine});
  EXPECT_EQ(v.kind, FleetTurnVerdict::kStop);
  EXPECT_THAT(v.why, HasSubstr("stopped: a service crash-loops on gpu-01"));
}

// Two services restarted one after the other (they share GPU 0). gpu-01's lease expires as the
// first restarts, and gpu-02 takes the slot: before the second restart gpu-01 finds its turn
// lost and waits until gpu-02 gives the slot back, so the two hosts are never dark at once.
TEST_F(FleetReconcilerTest, ATurnLostAfterTheFirstRestartIsTakenAgainBeforeTheSecond) {
  dir.Write("two/berth.yaml", TwoServices(""));
  dir.Write("two-longer/berth.yaml", TwoServices("    args: [\"--max-num-seqs\", \"64\"]\n"));
  ASSERT_EQ(ExitCodeOf(FleetApply("two").outcome), 0) << err.str();
  std::string digest = Plan("two-longer").manifest_digest;
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-00",
                       FleetReportToJson(Report("gpu-00", kFleetConverged, digest)))
                  .ok());
  FleetSpec f = Fleet(1);
  std::unique_ptr<FleetTurn> other;  // gpu-02
  std::chrono::milliseconds taken{0};
  bool second_while_other_dark = false;
  // FakeSystemd's restart is a stop, then a start (on_job sees "start").
  world.on_job = [&](const std::string& verb, const std::string&) {
    if (verb != "start") return;
    if (other) {
      second_while_other_dark = other->holding();
      return;
    }
    etcd.Expire(etcd.kv().at("/berth/fleets/prod/slots/0").lease);
    FleetTurnOptions o;
    o.host = "gpu-02";
    o.digest = kDigest;
    o.clock = &world.clock;
    other = std::make_unique<FleetTurn>(f, &etcd, o);
    EXPECT_TRUE(other->Acquire().ok());
    taken = world.clock.Elapsed();
  };
  world.clock.on_sleep = [&](std::chrono::milliseconds elapsed) {
    if (other && elapsed >= taken + std::chrono::seconds(30)) other->Release();
  };
  RunReport r = FleetApply("two-longer");
  EXPECT_EQ(ExitCodeOf(r.outcome), 0) << out.str() << err.str();
  ASSERT_TRUE(other);
  EXPECT_EQ(Count("restart alpha.service"), 1u);
  EXPECT_EQ(Count("restart beta.service"), 1u);
  EXPECT_FALSE(second_while_other_dark)
      << "the second service went down while gpu-02 held the only slot";
  EXPECT_THAT(out.str(), HasSubstr("this host's turn is lost"));
  EXPECT_GE(world.clock.Elapsed(), taken + std::chrono::seconds(30));
  EXPECT_EQ(etcd.max_slots_held(), 1);
  for (const auto& [k, v] : etcd.kv()) EXPECT_EQ(k.find("/slots/"), std::string::npos) << k;
  world.on_job = nullptr;
  world.clock.on_sleep = nullptr;
}

// The same, but etcd is unreachable when the lease is found lost: the turn cannot be taken
// again, so the pass stops before the second restart (nothing more goes dark), is not held, and
// the next pass with etcd back finishes it.
TEST_F(FleetReconcilerTest, ATurnLostThatCannotBeTakenAgainStopsBeforeTheNextServiceGoesDown) {
  dir.Write("two/berth.yaml", TwoServices(""));
  dir.Write("two-longer/berth.yaml", TwoServices("    args: [\"--max-num-seqs\", \"64\"]\n"));
  ASSERT_EQ(ExitCodeOf(FleetApply("two").outcome), 0) << err.str();
  std::string digest = Plan("two-longer").manifest_digest;
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-00",
                       FleetReportToJson(Report("gpu-00", kFleetConverged, digest)))
                  .ok());
  int starts = 0;
  world.on_job = [&](const std::string& verb, const std::string&) {
    if (verb != "start" || ++starts != 1) return;
    etcd.Expire(etcd.kv().at("/berth/fleets/prod/slots/0").lease);
    etcd.SetDown(true);
  };
  RunReport r = FleetApply("two-longer");
  EXPECT_EQ(ExitCodeOf(r.outcome), 1) << out.str() << err.str();
  EXPECT_TRUE(r.exec.turn_lost);
  EXPECT_FALSE(r.terminal) << "retried, not held";
  EXPECT_EQ(starts, 1) << "the second service was not taken down";
  EXPECT_THAT(err.str(), HasSubstr("this host's turn in its fleet was lost"));
  EXPECT_THAT(err.str(), HasSubstr("etcd cannot be reached"));
  world.on_job = nullptr;
  etcd.SetDown(false);
  r = FleetApply("two-longer");
  EXPECT_EQ(ExitCodeOf(r.outcome), 0) << out.str() << err.str();
  EXPECT_EQ(Plan("two-longer").outcome, Outcome::kNoChanges) << out.str();
}

TEST_F(FleetReconcilerTest, AFailedSwitchIsPublishedAsFailedAndGivesTheSlotBack) {
  ASSERT_EQ(ExitCodeOf(FleetApply("fleet-kimi").outcome), 0) << err.str();
  std::string digest = Plan("fleet-minimax").manifest_digest;
  ASSERT_TRUE(etcd.Put("/berth/fleets/prod/hosts/gpu-00",
                       FleetReportToJson(Report("gpu-00", kFleetConverged, digest)))
                  .ok());
  world.never_healthy.insert("vllm-minimax.service");
  RunReport r = FleetApply("fleet-minimax");
  EXPECT_EQ(ExitCodeOf(r.outcome), 4);
  EXPECT_TRUE(Running("vllm-kimi.service"));  // rolled back
  auto mine = Published("gpu-01");
  ASSERT_TRUE(mine);
  EXPECT_EQ(mine->state, kFleetFailed);
  EXPECT_EQ(mine->digest, digest);
  for (const auto& [k, v] : etcd.kv()) EXPECT_EQ(k.find("/slots/"), std::string::npos) << k;
  // What the next host of the fleet then concludes.
  FleetSpec f = Fleet(1, true);
  f.waves[0].hosts = {"gpu-00", "gpu-01"};
  EXPECT_EQ(MayGoDark(f, "gpu-05", digest, {*mine}).kind, FleetTurnVerdict::kStop);
}

}  // namespace
}  // namespace berth::testing
