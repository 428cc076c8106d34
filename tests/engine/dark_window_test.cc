// Dark windows through the Reconciler on the in-memory host (tests/support/fake_world.h): an
// apply records how long each start took to pass its health gate, and the next plan's
// disruption estimates its dark window from those times. The fake clock makes the times exact.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/apply/reconciler.h"
#include "engine/state/state.h"
#include "tests/providers/temp_dir.h"
#include "tests/support/fake_world.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// `service` serving on GPU 0 and port 8000, with a 10-minute health timeout; the other one of
// kimi and minimax stopped, or absent from the manifest.
std::string Manifest(const std::string& running) {
  std::string m = "berth: 1\nhost: {store: /models}\nmodels:\n";
  m += "  kimi: {source: hf://moonshotai/Kimi-K2, revision: " + Commit("a") + ", size: 20GB}\n";
  m += "  minimax: {source: hf://MiniMaxAI/MiniMax-M2, revision: " + Commit("b") +
       ", size: 20GB}\nservices:\n";
  for (const std::string name : {"kimi", "minimax"})
    m += "  vllm-" + name + ":\n    model: " + name +
         "\n    engine: vllm\n    state: " + (name == running ? "running" : "stopped") +
         "\n    gpus: [0]\n    port: 8000\n    vllm: {gpu_memory_utilization: 0.9}\n"
         "    health: {timeout: 10m, interval: 5s}\n";
  return m;
}

Observed EmptyHost() {
  Observed o;
  o.hostname = "gpu-01";
  o.store.path = "/models";
  o.store.total_bytes = 2'000'000'000'000;
  o.store.free_bytes = 1'000'000'000'000;
  o.gpus.push_back({0, "GPU-0", "NVIDIA H200", GiB(80), 0, {}});
  return o;
}

class DarkWindowTest : public ::testing::Test {
 protected:
  DarkWindowTest() : world(EmptyHost()) {
    dir.Write("kimi/berth.yaml", Manifest("kimi"));
    dir.Write("minimax/berth.yaml", Manifest("minimax"));
    // Probes fail until the Nth: with the executor's backoff (200 ms doubling, up to the 5 s
    // interval) the 5th probe answers 3 s after the start, the 4th 1.4 s after it.
    world.healthy_after["vllm-kimi.service"] = 5;
    world.healthy_after["vllm-minimax.service"] = 4;
  }
  RunReport Pass(const std::string& manifest, bool apply, PlanFormat format = PlanFormat::kText) {
    out.str("");
    err.str("");
    Reporter say(out, err, format);
    ReconcileOptions o;
    o.manifest_path = dir / (manifest + "/berth.yaml");
    o.state_dir = dir / "state";
    o.apply = apply;
    o.yes = true;
    return Reconciler(world.Deps(&say)).Run(o);
  }
  std::vector<uint64_t> Recorded(const std::string& unit) {
    auto st = StateDir(dir / "state").Load();
    EXPECT_TRUE(st.ok()) << st.status().message();
    if (!st.ok() || !st->start_times_ms.count(unit)) return {};
    return st->start_times_ms.at(unit);
  }
  std::string DisruptionLine() {
    std::string text = out.str();
    size_t at = text.find("disruption: ");
    return at == std::string::npos ? "" : text.substr(at, text.find('\n', at) - at);
  }

  TempDir dir;
  FakeWorld world;
  std::ostringstream out, err;
};

TEST_F(DarkWindowTest, AnApplyRecordsTheStartAndTheNextPlanEstimatesTheDarkWindowFromIt) {
  ASSERT_EQ(Pass("kimi", true).outcome, Outcome::kApplied) << err.str();
  EXPECT_THAT(Recorded("vllm-kimi.service"), ElementsAre(3000));

  ASSERT_EQ(Pass("minimax", false).outcome, Outcome::kPlanned) << err.str();
  EXPECT_EQ(DisruptionLine(),
            "disruption: port 8000 unavailable from step 1 until step 3 is healthy "
            "(vllm-kimi.service stopped to make room for vllm-minimax): no stop of "
            "vllm-kimi.service recorded yet; no start of vllm-minimax.service recorded yet; at "
            "worst 12m3s (vllm-kimi.service's stop, up to its 2m stop timeout, then "
            "vllm-minimax.service's 10m health timeout, then vllm-kimi.service's start, 3s at "
            "the slowest recorded, if berth rolls back)");

  ASSERT_EQ(Pass("minimax", true).outcome, Outcome::kApplied) << err.str();
  EXPECT_THAT(Recorded("vllm-minimax.service"), ElementsAre(1400));
  EXPECT_THAT(Recorded("vllm-kimi.service"), ElementsAre(3000)) << "kept while it is stopped";

  // And back: kimi's own start now estimates the window, minimax's the rollback.
  ASSERT_EQ(Pass("kimi", false).outcome, Outcome::kPlanned) << err.str();
  EXPECT_THAT(DisruptionLine(),
              HasSubstr("(vllm-minimax.service stopped to make room for vllm-kimi): about 3s (no "
                        "stop of vllm-minimax.service recorded yet; the last start of "
                        "vllm-kimi.service took 3s); at worst 12m1s (vllm-minimax.service's "
                        "stop, up to its 2m stop timeout, then vllm-kimi.service's 10m health "
                        "timeout, then vllm-minimax.service's start, 1s at the slowest recorded, "
                        "if berth rolls back)"));
  ASSERT_EQ(Pass("kimi", false, PlanFormat::kJson).outcome, Outcome::kPlanned) << err.str();
  nlohmann::json plan = nlohmann::json::parse(out.str());
  ASSERT_EQ(plan["disruption"].size(), 1u);
  EXPECT_EQ(plan["disruption"][0]["expected_ms"], 3000);
  EXPECT_EQ(plan["disruption"][0]["worst_ms"], 120'000 + 601'400);
  EXPECT_EQ(plan["disruption"][0]["samples"], nlohmann::json::array({3000}));
  EXPECT_EQ(plan["disruption"][0]["samples_unit"], "vllm-kimi.service");
}

// The old server's stop is part of a stop-first switch's dark window: an apply records how long
// each stop took, and the next plan counts it (llama-server with requests in flight takes 30 s),
// with the unit's stop timeout in the worst case.
TEST_F(DarkWindowTest, AnApplyRecordsEachStopAndTheNextPlanCountsItAndTheStopTimeout) {
  ASSERT_EQ(Pass("kimi", true).outcome, Outcome::kApplied) << err.str();
  world.on_job = [&](const std::string& verb, const std::string&) {
    if (verb == "stop") world.clock.Advance(std::chrono::milliseconds(30'020));
  };
  ASSERT_EQ(Pass("minimax", true).outcome, Outcome::kApplied) << err.str();
  ASSERT_EQ(Pass("kimi", true).outcome, Outcome::kApplied) << err.str();
  auto st = StateDir(dir / "state").Load();
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(st->stop_times_ms["vllm-kimi.service"], std::vector<uint64_t>{30'020});
  EXPECT_EQ(st->stop_times_ms["vllm-minimax.service"], std::vector<uint64_t>{30'020});
  world.host.Unit("vllm-kimi.service").timeout_stop_usec = 45'000'000;
  ASSERT_EQ(Pass("minimax", false).outcome, Outcome::kPlanned) << err.str();
  EXPECT_THAT(DisruptionLine(),
              HasSubstr("(vllm-kimi.service stopped to make room for vllm-minimax): about 31s (the "
                        "last stop of vllm-kimi.service took 30s; the last start of "
                        "vllm-minimax.service took 1s); at worst 10m48s (vllm-kimi.service's "
                        "stop, up to its 45s stop timeout, then vllm-minimax.service's 10m health "
                        "timeout, then vllm-kimi.service's start, 3s at the slowest recorded, "
                        "if berth rolls back)"));
  ASSERT_EQ(Pass("minimax", false, PlanFormat::kJson).outcome, Outcome::kPlanned) << err.str();
  nlohmann::json plan = nlohmann::json::parse(out.str());
  ASSERT_EQ(plan["disruption"].size(), 1u);
  EXPECT_EQ(plan["disruption"][0]["expected_ms"], 1400 + 30'020);
  EXPECT_EQ(plan["disruption"][0]["worst_ms"], 45'000 + 600'000 + 3'000);
  EXPECT_EQ(plan["disruption"][0]["stop"],
            nlohmann::json::parse(R"({"unit": "vllm-kimi.service", "samples": [30020],
                                      "timeout_ms": 45000})"));
}

TEST_F(DarkWindowTest, ARollbacksHealthyAgainCountsAsAStartOfTheOldService) {
  ASSERT_EQ(Pass("kimi", true).outcome, Outcome::kApplied) << err.str();
  world.never_healthy.insert("vllm-minimax.service");
  RunReport r = Pass("minimax", true);
  ASSERT_EQ(r.outcome, Outcome::kFailed) << err.str();
  ASSERT_TRUE(r.exec.rolled_back) << err.str();
  EXPECT_THAT(Recorded("vllm-kimi.service"), ElementsAre(3000, 3000));
  EXPECT_THAT(Recorded("vllm-minimax.service"), ElementsAre()) << "it never passed its gate";
}

TEST_F(DarkWindowTest, AnInPlaceRollbacksRestartCountsAsAStartOfTheUnit) {
  ASSERT_EQ(Pass("kimi", true).outcome, Outcome::kApplied) << err.str();
  std::string longer = Manifest("kimi");
  longer.insert(longer.find("    health:"), "    args: [\"--max-num-seqs\", \"64\"]\n");
  dir.Write("kimi-longer/berth.yaml", longer);
  // The new flag breaks the server: whatever starts from a unit with it never turns healthy.
  world.on_job = [&](const std::string& verb, const std::string& unit) {
    if (verb != "start" || unit != "vllm-kimi.service") return;
    if (world.host.Unit(unit).content.find("--max-num-seqs") != std::string::npos)
      world.never_healthy.insert(unit);
    else
      world.never_healthy.erase(unit);
  };
  RunReport r = Pass("kimi-longer", true);
  ASSERT_EQ(r.outcome, Outcome::kFailed) << err.str();
  ASSERT_TRUE(r.exec.rolled_back) << err.str();
  EXPECT_THAT(Recorded("vllm-kimi.service"), ElementsAre(3000, 3000))
      << "the restart on its previous unit file, from the restart to healthy";
}

}  // namespace
}  // namespace berth::testing
