// A fleet of 300 simulated hosts against one real etcd (Debian's etcd-server, on loopback): each
// host is a thread running berth's own fleet turn and report code (engine/fleet/fleet_turn.h)
// around a simulated switch of a few milliseconds, as Reconciler does around a real one: take the
// turn, go dark, report converged (or failed), give the slot back. The rollout has waves
// (canary, early, rest) and max_unavailable 5.
//
// It proves that never more than 5 hosts are dark at once, that each wave goes dark only after
// every host of the waves before it converged, and that a failed canary stops everyone else
// before anything goes dark. And it measures what waiting costs etcd, by watch and by polling
// (berth's clients count their requests and the bytes they read): the figures are printed, and
// docs/fleet.md carries one run's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/fleet_report.h"
#include "engine/fleet/fleet_turn.h"
#include "planners/fleet.h"
#include "providers/etcd/etcd.h"
#include "tests/support/etcd_server.h"

namespace berth {
namespace {

using testing::EtcdServer;
using Ms = std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

constexpr int kHosts = 300;
constexpr int kMaxUnavailable = 5;
constexpr Ms kDark{15};  // one host's simulated switch

std::string HostName(int i) {
  char name[16];
  std::snprintf(name, sizeof(name), "h-%03d", i);
  return name;
}

FleetSpec Fleet(const std::string& name, const std::string& endpoint) {
  FleetSpec f;
  f.name = name;
  f.endpoints = {endpoint};
  f.max_unavailable = kMaxUnavailable;
  f.wait_ms = 5 * 60 * 1000;
  f.request_timeout_ms = 20000;  // 300 clients on two cores: etcd may be slow to answer
  f.waves = {{"canary", {"h-000"}, {}}, {"early", {"h-0[0-2]?"}, {}}, {"rest", {"*"}, {}}};
  return f;
}

/// What happened in one rollout, in the order it happened.
struct Rollout {
  std::mutex mu;
  int dark = 0, max_dark = 0;
  int64_t sequence = 0;
  std::vector<int64_t> went_dark;   // per host: when (a sequence number), -1 never
  std::vector<int64_t> converged;   // per host: when it reported converged, -1 never
  std::vector<std::string> errors;  // per host: Acquire's error, "" when none
  int stopped = 0;                  // hosts told the rollout stopped (FailedPrecondition)
  int retries = 0;                  // passes that could not reach etcd, tried again
  Rollout() : went_dark(kHosts, -1), converged(kHosts, -1), errors(kHosts) {}
};

struct Traffic {
  double requests = 0, watches = 0, bytes = 0;
  double seconds = 0;
  int switched = 0;
};

/// Runs every host's turn for manifest `digest` in fleet `f` (watching or polling), `fail`: the
/// hosts whose switch fails. Stops the hosts still waiting after `limit`.
Traffic RunRollout(const FleetSpec& f, const std::string& digest, bool watch, Ms limit,
                   const std::vector<int>& fail, Rollout* out) {
  auto traffic = std::make_shared<EtcdTraffic>();
  std::atomic<bool> stop{false};
  std::atomic<int> finished{0};
  auto start = SteadyClock::now();
  std::vector<std::thread> hosts;
  for (int i = 0; i < kHosts; ++i) {
    hosts.emplace_back([&, i] {
      struct Finished {
        std::atomic<int>& n;
        ~Finished() { ++n; }
      } finish{finished};
      EtcdOptions options;
      options.endpoints = f.endpoints;
      options.timeout = Ms(f.request_timeout_ms);
      options.traffic = traffic;
      auto etcd = ConnectEtcd(options);
      if (!etcd.ok()) {
        std::lock_guard<std::mutex> l(out->mu);
        out->errors[i] = etcd.status().message();
        return;
      }
      FleetTurnOptions o;
      o.host = HostName(i);
      o.digest = digest;
      o.stop = &stop;
      o.watch = watch;
      // The hosts' loops find the new manifest within a second of one another.
      std::this_thread::sleep_for(Ms(3 * i));
      FleetTurn turn(f, etcd->get(), o);
      Status s = turn.Acquire();
      // What berth's loop does after a pass that could not reach etcd: try again (sooner here).
      while (s.code() == Status::Code::kUnavailable && !stop.load()) {
        {
          std::lock_guard<std::mutex> l(out->mu);
          ++out->retries;
        }
        std::this_thread::sleep_for(Ms(500));
        s = turn.Acquire();
      }
      if (!s.ok()) {
        std::lock_guard<std::mutex> l(out->mu);
        if (s.code() == Status::Code::kFailedPrecondition)
          ++out->stopped;
        else
          out->errors[i] = s.message();
        return;
      }
      {
        std::lock_guard<std::mutex> l(out->mu);
        out->went_dark[i] = out->sequence++;
        out->max_dark = std::max(out->max_dark, ++out->dark);
      }
      std::this_thread::sleep_for(kDark);
      bool failed = std::find(fail.begin(), fail.end(), i) != fail.end();
      {
        std::lock_guard<std::mutex> l(out->mu);
        --out->dark;  // before the report and the release: counted dark while holding
        if (!failed) out->converged[i] = out->sequence++;
      }
      FleetReport r;
      r.state = failed ? kFleetFailed : kFleetConverged;
      r.message = failed ? "gate failed: simulated" : "";
      EXPECT_TRUE(turn.Publish(r).ok());
      turn.Release();
    });
  }
  // Stops the waiting hosts once `limit` passed (the polling run measures a slice).
  std::thread timer([&] {
    while (finished.load() < kHosts && SteadyClock::now() - start < limit)
      std::this_thread::sleep_for(Ms(50));
    stop = true;
  });
  for (std::thread& t : hosts) t.join();
  stop = true;
  timer.join();
  Traffic t;
  t.seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  t.requests = static_cast<double>(traffic->requests.load());
  t.watches = static_cast<double>(traffic->watches.load());
  t.bytes = static_cast<double>(traffic->bytes_read.load());
  for (int64_t d : out->went_dark) t.switched += d >= 0;
  return t;
}

void Print(const char* mode, const Traffic& t) {
  std::printf(
      "fleet simulation, %d hosts, %s: %d switched in %.1f s; %.0f requests (%.0f watches), "
      "%.0f requests/s; %.1f MB read, %.2f MB/s, %.1f KB per switch\n",
      kHosts, mode, t.switched, t.seconds, t.requests, t.watches, t.requests / t.seconds,
      t.bytes / 1e6, t.bytes / 1e6 / t.seconds, t.switched ? t.bytes / 1e3 / t.switched : 0.0);
}

class FleetSimulationTest : public ::testing::Test {
 protected:
  void StartEtcd() {
    std::string error;
    ASSERT_TRUE(etcd_.Start(&error)) << error;
  }
  EtcdServer etcd_;
};

TEST_F(FleetSimulationTest, ThreeHundredHostsRollOutInWavesNeverMoreThanFiveDarkByWatch) {
  BERTH_REQUIRE_ETCD();
  ASSERT_NO_FATAL_FAILURE(StartEtcd());
  FleetSpec f = Fleet("watch", etcd_.client_url());
  Rollout r;
  Traffic t = RunRollout(f, "d1", /*watch=*/true, std::chrono::minutes(4), {}, &r);
  Print("by watch", t);
  std::printf("passes that could not reach etcd and were tried again: %d\n", r.retries);
  for (int i = 0; i < kHosts; ++i) ASSERT_EQ(r.errors[i], "") << HostName(i);
  EXPECT_EQ(t.switched, kHosts);
  EXPECT_LE(r.max_dark, kMaxUnavailable);
  EXPECT_GT(r.max_dark, 1) << "the slots were used side by side";
  // Each wave went dark only after every host of the waves before it converged.
  for (int i = 0; i < kHosts; ++i) {
    for (int j = 0; j < kHosts; ++j) {
      if (WaveIndex(f, HostName(j)) < WaveIndex(f, HostName(i))) {
        ASSERT_LT(r.converged[j], r.went_dark[i]) << HostName(j) << " before " << HostName(i);
      }
    }
  }
  // Waiting by watch costs etcd a dozen requests per host and switch (two pages of reports,
  // the waiting report, a lease and a transaction or two, the switching and converged reports,
  // a revoke, a keep-alive now and then), not a read of every report at every look: fewer than
  // 40 per host in all, whatever the rollout's length (one run: 14).
  EXPECT_LT(t.requests, 40.0 * kHosts);
}

TEST_F(FleetSimulationTest, AFailedCanaryStopsTheOtherTwoHundredAndNinetyNineBeforeAnyGoesDark) {
  BERTH_REQUIRE_ETCD();
  ASSERT_NO_FATAL_FAILURE(StartEtcd());
  FleetSpec f = Fleet("canary", etcd_.client_url());
  Rollout r;
  Traffic t = RunRollout(f, "d2", /*watch=*/true, std::chrono::minutes(2), {0}, &r);
  Print("failed canary", t);
  EXPECT_EQ(r.went_dark[0], 0) << "the canary went first";
  EXPECT_EQ(t.switched, 1);
  EXPECT_EQ(r.stopped, kHosts - 1);
  for (int i = 1; i < kHosts; ++i) EXPECT_EQ(r.errors[i], "") << HostName(i);
}

// Polling, the same rollout for five seconds: the hosts look at every report every 1 to 8 s.
// Compared per switch with the watch above (printed), and here by the reads of reports: each
// look reads every report, so its bytes grow with hosts × reports.
TEST_F(FleetSimulationTest, PollingReadsEveryReportAtEveryLook) {
  BERTH_REQUIRE_ETCD();
  ASSERT_NO_FATAL_FAILURE(StartEtcd());
  FleetSpec f = Fleet("poll", etcd_.client_url());
  Rollout r;
  Traffic t = RunRollout(f, "d3", /*watch=*/false, Ms(5000), {}, &r);
  Print("by polling (a 5 s slice)", t);
  EXPECT_LE(r.max_dark, kMaxUnavailable);
  EXPECT_EQ(t.watches, 0);
  EXPECT_GT(t.requests, kHosts) << "each host looked more than once";
}

}  // namespace
}  // namespace berth
