// Services on disjoint GPUs and ports come up side by side (core/plan.h ParallelStarts):
// both starts go out before either gate is waited on, the gates are probed together, and the
// one that fails is the only one the apply reports (and rolls back); the other stays up.
// In-memory host with a jumping clock, so "together" is exact: two services take the time of
// one. tests/e2e/parallel_start_test.cc shows the same on a real systemd.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "engine/apply/reconciler.h"
#include "engine/cli/commands.h"
#include "tests/providers/temp_dir.h"
#include "tests/support/fake_world.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;

// Service `name` on `gpus`, port `port`, with its own model.
std::string Service(const std::string& name, const std::string& gpus, int port) {
  return "  " + name + ":\n    model: " + name + "\n    engine: vllm\n    gpus: " + gpus +
         "\n    port: " + std::to_string(port) +
         "\n    vllm: {gpu_memory_utilization: 0.4}\n    health: {timeout: 10m, interval: 5s}\n";
}

std::string Manifest(const std::vector<std::string>& services) {
  std::string m = "berth: 1\nhost: {store: /models}\nmodels:\n";
  for (const auto& s : services)
    m += "  " + s.substr(2, s.find(':') - 2) + ": {source: hf://org/" +
         s.substr(2, s.find(':') - 2) + ", revision: " + Commit(s.substr(2, 1)) + ", size: 1GB}\n";
  m += "services:\n";
  for (const auto& s : services) m += s;
  return m;
}

Observed TwoGpus() {
  Observed o;
  o.hostname = "gpu-01";
  o.store.path = "/models";
  o.store.exists = true;
  o.store.total_bytes = 2'000'000'000'000;
  o.store.free_bytes = 1'000'000'000'000;
  o.gpus.push_back({0, "GPU-0", "NVIDIA H200", GiB(80), 0, {}});
  o.gpus.push_back({1, "GPU-1", "NVIDIA H200", GiB(80), 0, {}});
  return o;
}

class ParallelStartTest : public ::testing::Test {
 protected:
  ParallelStartTest() : world(TwoGpus()) {
    dir.Write("apart/berth.yaml",
              Manifest({Service("alpha", "[0]", 8000), Service("beta", "[1]", 8001)}));
    dir.Write("shared/berth.yaml",
              Manifest({Service("alpha", "[0]", 8000), Service("beta", "[0]", 8001)}));
    dir.Write("alone/berth.yaml", Manifest({Service("alpha", "[0]", 8000)}));
    world.healthy_after["alpha.service"] = 6;
    world.healthy_after["beta.service"] = 6;
  }

  // One pass through the Reconciler on `w` (default: world), as `berth apply --yes` or `plan`.
  RunReport Pass(const std::string& manifest, bool apply, FakeWorld* w = nullptr,
                 const std::string& state = "state") {
    out.str("");
    err.str("");
    Reporter say(out, err, PlanFormat::kText);
    ReconcileOptions o;
    o.manifest_path = dir / (manifest + "/berth.yaml");
    o.state_dir = dir / state;
    o.apply = apply;
    o.yes = true;
    return Reconciler((w ? w : &world)->Deps(&say)).Run(o);
  }

  // Where `call` first appears in the world's calls (calls.size() when never).
  size_t First(const std::string& call) const {
    return static_cast<size_t>(std::find(world.calls.begin(), world.calls.end(), call) -
                               world.calls.begin());
  }

  TempDir dir;
  FakeWorld world;
  std::ostringstream out, err;
};

TEST_F(ParallelStartTest, ThePlanFindsTheServicesOnDisjointGpusAndSaysTheyStartTogether) {
  RunReport r = Pass("apart", false);
  const std::vector<ParallelGroup>& groups = r.plan.groups;
  ASSERT_EQ(groups.size(), 1u) << out.str();
  ASSERT_EQ(groups[0].chains.size(), 2u);
  const Action& first = r.plan.actions[groups[0].chains[0].start];
  const Action& second = r.plan.actions[groups[0].chains[1].start];
  EXPECT_EQ(first.kind, ActionKind::kStart);
  EXPECT_EQ(second.kind, ActionKind::kStart);
  EXPECT_NE(first.unit, second.unit);
  EXPECT_THAT(out.str(), HasSubstr("start side by side"));
  EXPECT_THAT(out.str(), HasSubstr("service/alpha (steps"));
  EXPECT_THAT(out.str(), HasSubstr("service/beta (steps"));

  // On one GPU they fit (0.4 + 0.4), but one waits for the other: nothing side by side.
  RunReport shared = Pass("shared", false);
  EXPECT_FALSE(shared.plan.blocked()) << out.str();
  EXPECT_TRUE(shared.plan.groups.empty());
  EXPECT_THAT(out.str(), ::testing::Not(HasSubstr("side by side")));
}

TEST_F(ParallelStartTest, TwoServicesOnDisjointGpusTakeTheTimeOfOne) {
  // One service alone, on a host of its own: how long its start takes on this clock.
  FakeWorld single(TwoGpus());
  single.healthy_after["alpha.service"] = 6;
  RunReport single_report = Pass("alone", true, &single, "single-state");
  ASSERT_EQ(single_report.outcome, Outcome::kApplied) << err.str();
  auto alone = single.clock.Elapsed();

  RunReport both = Pass("apart", true);
  ASSERT_EQ(both.outcome, Outcome::kApplied) << err.str();
  EXPECT_EQ(world.clock.Elapsed(), alone) << out.str();
  // Each start's time to healthy is its own, as if it had started alone (the dark-window
  // estimates of later plans are made from them).
  EXPECT_EQ(both.exec.start_to_healthy_ms["alpha.service"],
            single_report.exec.start_to_healthy_ms["alpha.service"]);
  EXPECT_EQ(both.exec.start_to_healthy_ms["beta.service"],
            single_report.exec.start_to_healthy_ms["alpha.service"]);
  // Both starts went out before anything was probed.
  EXPECT_LT(First("start beta.service"), First("probe 8000"));
  EXPECT_LT(First("start alpha.service"), First("probe 8001"));
  EXPECT_EQ(Pass("apart", false).outcome, Outcome::kNoChanges) << out.str();
}

TEST_F(ParallelStartTest, TheOneThatFailsItsGateIsReportedAndTheOtherStillComesUpEnabled) {
  // Alpha comes first in the plan: one after another, beta would never have started.
  world.never_healthy.insert("alpha.service");
  RunReport r = Pass("apart", true);
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_EQ(ExitCodeOf(r.outcome), 4);
  EXPECT_THAT(err.str(), HasSubstr("alpha.service did not become healthy within 10m"));
  EXPECT_THAT(err.str(), ::testing::Not(HasSubstr("beta.service did not")));
  const ObservedUnit* beta = world.host.observed().FindUnit("beta.service");
  ASSERT_NE(beta, nullptr);
  EXPECT_EQ(beta->active_state, "active");
  EXPECT_EQ(beta->unit_file_state, "enabled");
  const ObservedUnit* alpha = world.host.observed().FindUnit("alpha.service");
  ASSERT_NE(alpha, nullptr);
  EXPECT_NE(alpha->unit_file_state, "enabled");
  // Beta's gate did not wait for alpha's timeout: it was probed only until it answered.
  EXPECT_EQ(world.probes["beta.service"], 6);
}

}  // namespace
}  // namespace berth::testing
