// The seed example's plans, text and JSON, against files kept in tests/engine/golden/.
// BERTH_UPDATE_GOLDEN=1 rewrites them (review the diff before committing).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json_text.h"
#include "core/observed_json.h"
#include "engine/cli/commands.h"
#include "engine/output/plan_output.h"
#include "manifests/loader.h"
#include "planners/planner.h"
#include "planners/servers/adapter.h"

namespace berth {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class GoldenTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  // Paths in the plan are as given on the command line: run from the source dir.
  void SetUp() override { ASSERT_EQ(chdir(BERTH_SOURCE_DIR), 0); }
};

TEST_P(GoldenTest, PlanMatchesTheGoldenFile) {
  auto [example, format] = GetParam();
  PlanCommand cmd;
  cmd.manifest_path = "manifests/examples/" + example + "/berth.yaml";
  cmd.observed_path = "manifests/examples/" + example + "/observed.json";
  cmd.format = format == "json" ? "json" : "text";
  cmd.diff = format == "diff.txt";  // berth plan --diff: every unit file's diff
  std::ostringstream out, err;
  int rc = RunPlan(cmd, out, err);
  EXPECT_EQ(rc, kExitOk) << err.str();
  std::string golden = "tests/engine/golden/" + example + ".plan." + format;
  if (std::getenv("BERTH_UPDATE_GOLDEN")) std::ofstream(golden) << out.str();
  EXPECT_EQ(out.str(), ReadFile(golden)) << "regenerate with BERTH_UPDATE_GOLDEN=1 if intended";
  // Same inputs, same bytes.
  std::ostringstream again;
  RunPlan(cmd, again, err);
  EXPECT_EQ(out.str(), again.str());
}

// The JSON plan's text is exactly what one dump of its document gives, empty arrays included.
TEST(PlanJsonTest, StreamedTextIsWhatOneDumpOfTheDocumentGives) {
  ASSERT_EQ(chdir(BERTH_SOURCE_DIR), 0);
  for (const char* example : {"blackwell-8x", "single-gpu"}) {
    PlanCommand cmd;
    cmd.manifest_path = std::string("manifests/examples/") + example + "/berth.yaml";
    cmd.observed_path = std::string("manifests/examples/") + example + "/observed.json";
    cmd.format = "json";
    std::ostringstream out, err;
    ASSERT_EQ(RunPlan(cmd, out, err), kExitOk) << err.str();
    nlohmann::ordered_json doc = nlohmann::ordered_json::parse(out.str());
    ASSERT_FALSE(doc["resource_changes"].empty()) << example;
    EXPECT_EQ(out.str(), DumpJson(doc, 2) + "\n") << example;
  }
  Plan empty;
  std::string text = PlanToJson(empty, Desired{});
  EXPECT_NE(text.find("\"resource_changes\": [],"), std::string::npos) << text;
  EXPECT_EQ(text, DumpJson(nlohmann::ordered_json::parse(text), 2) + "\n");
}

// A plan of thousands of actions is one dump of the document, every step in its place.
TEST(PlanJsonTest, AThousandsOfStepsPlanIsStillOneDumpWithEveryStepInItsPlace) {
  const std::string dir = std::string(BERTH_SOURCE_DIR) + "/manifests/examples/blackwell-8x/";
  LoadResult r = LoadManifests(dir + "berth.yaml");
  ASSERT_TRUE(r.diagnostics.empty()) << r.diagnostics[0].ToString();
  std::ifstream in(dir + "observed.json");
  std::stringstream text;
  text << in.rdbuf();
  Result<Observed> o = ObservedFromJson(text.str(), "observed.json");
  ASSERT_TRUE(o.ok()) << o.status().message();
  Plan seed = MakePlan(r.desired, *o);
  ASSERT_GT(seed.actions.size(), 5u);
  Plan big = seed;
  big.actions.clear();
  for (int k = 0; big.actions.size() < 2600; ++k)
    for (Action a : seed.actions) {
      a.address += "-" + std::to_string(k);
      big.actions.push_back(std::move(a));
    }
  std::string json = PlanToJson(big, r.desired);
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(json);
  EXPECT_EQ(json, DumpJson(doc, 2) + "\n");
  const auto& changes = doc["resource_changes"];
  ASSERT_EQ(changes.size(), big.actions.size());
  for (size_t i = 0; i < big.actions.size(); ++i) {
    ASSERT_EQ(changes[i]["step"], i + 1);
    ASSERT_EQ(changes[i]["address"], big.actions[i].address) << "step " << i + 1;
  }
}

// The seed example renders what MiniMax's vLLM guide runs on 8 GPUs
// (MiniMax-AI/MiniMax-M2.5 docs/vllm_deploy_guide.md at 60fa60fd, "8-GPU deployment command"),
// no more: no speculative decoding, nothing in args.
TEST(SeedExample, RendersExactlyTheFlagsOfMinimaxsVllmGuide) {
  LoadResult r =
      LoadManifests(std::string(BERTH_SOURCE_DIR) + "/manifests/examples/blackwell-8x/berth.yaml");
  ASSERT_TRUE(r.diagnostics.empty()) << r.diagnostics[0].ToString();
  const ServiceSpec& s = r.desired.services.at("vllm-minimax-m25");
  RenderContext ctx;
  ctx.executable = "vllm";
  ctx.snapshot_path = "/shared/models/models--MiniMaxAI--MiniMax-M2.5/snapshots/c";
  std::vector<std::string> argv = ServiceArgv(s, ctx);
  std::vector<std::string> guide = {
      "vllm", "serve", ctx.snapshot_path,
      // berth's own: the name, the address, the GPU share
      "--served-model-name", "MiniMax-M2.5", "--host", "0.0.0.0", "--port", "8000",
      // the guide's
      "--tensor-parallel-size", "8", "--pipeline-parallel-size", "1", "--enable-expert-parallel",
      "--gpu-memory-utilization", "0.9", "--trust-remote-code", "--enable-auto-tool-choice",
      "--tool-call-parser", "minimax_m2", "--reasoning-parser", "minimax_m2_append_think"};
  EXPECT_EQ(argv, guide);
  EXPECT_TRUE(s.args.empty());
  EXPECT_TRUE(s.env.empty());
}

// A port left dark while a state-only service of unknown port starts: "nothing serves it" holds
// only as far as berth knows, and the text and JSON say so.
TEST(PlanText, ADarkPortSaysWhenAServiceOfUnknownPortMayServeItAfter) {
  Plan p;
  p.host = "gpu-01";
  Action start = MakeAction(ActionKind::kStart);
  start.address = "service/kimi";
  start.reason = Reason::kNotRunning;
  start.detail = "not running (no engine)";
  Action stop = MakeAction(ActionKind::kStop);
  stop.address = "service/minimax";
  stop.reason = Reason::kWantedStopped;
  stop.detail = "state: stopped; frees port 8000";
  p.actions = {start, stop};
  Disruption d;
  d.port = 8000;
  d.from_step = 1;  // printed as step 2
  d.service = "service/minimax";
  d.reason = "minimax.service stopped (state: stopped)";
  d.caveat = "service/kimi starts at step 1 on a port berth does not know";
  p.disruptions = {d};
  EXPECT_NE(
      PlanToText(p, Desired{})
          .find("disruption: port 8000 unavailable from step 2 on (nothing serves it after this "
                "plan that berth knows of: service/kimi starts at step 1 on a port berth does not "
                "know) (minimax.service stopped (state: stopped))\n"),
      std::string::npos)
      << PlanToText(p, Desired{});
  EXPECT_NE(
      PlanToJson(p, Desired{})
          .find("\"caveat\": \"service/kimi starts at step 1 on a port berth does not know\""),
      std::string::npos)
      << PlanToJson(p, Desired{});
}

// A dark window's estimate in words: the median and range of the recorded starts, or none
// recorded; the worst case with the starts a rollback brings back, or the port left dark.
TEST(PlanText, ADarkWindowsEstimateSaysWhatItIsMadeOf) {
  DarkEstimate e;
  e.gate_unit = "vllm-minimax.service";
  e.samples_ms = {47'400, 38'000, 41'600};
  e.expected_ms = 41'600;
  e.gate_timeout_ms = 15 * 60'000;
  e.rollback = {{"vllm-kimi.service", {40'000, 42'000}, 30 * 60'000}};
  e.worst_ms = 15 * 60'000 + 42'000;
  EXPECT_EQ(DarkEstimateText(e),
            "about 42s (last 3 starts of vllm-minimax.service took 38s–47s); at worst 15m42s (its "
            "15m health timeout, then vllm-kimi.service's start, 42s at the slowest recorded, if "
            "berth rolls back)");
  e.samples_ms = {40'000, 40'000};
  e.expected_ms = 40'000;
  e.rollback = {{"vllm-kimi.service", {}, 30 * 60'000}, {"other.service", {}, 0}};
  e.worst_ms = 45 * 60'000;
  EXPECT_EQ(
      DarkEstimateText(e),
      "about 40s (last 2 starts of vllm-minimax.service each took 40s); at worst 45m (its 15m "
      "health timeout, then vllm-kimi.service's start, up to its 30m health timeout, then "
      "other.service's start (not counted: berth knows no health check for it), if berth "
      "rolls back)");
  e.samples_ms.clear();
  e.expected_ms.reset();
  e.rollback.clear();
  e.worst_ms = 15 * 60'000;
  EXPECT_EQ(DarkEstimateText(e),
            "no start of vllm-minimax.service recorded yet; at worst 15m (its 15m health timeout; "
            "past it berth gives up and the port stays dark)");
  EXPECT_EQ(DarkEstimateText(DarkEstimate{}), "") << "a port that stays dark has no estimate";
}

// Saturated figures (a saved observation's times near 2^64) print as what they are, never wrapped
// round to a few seconds by the rounding.
TEST(PlanText, AWindowOfAlmost2To64MillisecondsIsNotPrintedAsAFewSeconds) {
  DarkEstimate e;
  e.gate_unit = "sb.service";
  e.samples_ms = {UINT64_MAX};
  e.expected_ms = UINT64_MAX;
  e.gate_timeout_ms = 20'000;
  e.worst_ms = UINT64_MAX;
  const std::string text = DarkEstimateText(e);
  EXPECT_EQ(text.rfind("about 5124095576030h", 0), 0u) << text;
}

// A stop-first switch: the old server's stops and its stop timeout are part of the window.
TEST(PlanText, ADarkWindowThatBeginsWithAStopSaysWhatTheStopAdds) {
  DarkEstimate e;
  e.gate_unit = "sb.service";
  e.samples_ms = {400};
  e.stop_unit = "sa.service";
  e.stop_samples_ms = {30'020, 30'010};
  e.expected_ms = 400 + 30'015;
  e.stop_timeout_ms = 45'000;
  e.gate_timeout_ms = 20'000;
  e.worst_ms = 65'000;
  EXPECT_EQ(DarkEstimateText(e),
            "about 30s (last 2 stops of sa.service each took 30s; the last start of sb.service "
            "took 400ms); at worst 1m5s (sa.service's stop, up to its 45s stop timeout, then "
            "sb.service's 20s health timeout; past it berth gives up and the port stays dark)");
  e.stop_samples_ms.clear();
  e.expected_ms = 400;
  e.stop_timeout_ms = ObservedUnit::kNoStopTimeout;
  e.worst_ms = 20'000;
  EXPECT_EQ(DarkEstimateText(e),
            "about 400ms (no stop of sa.service recorded yet; the last start of sb.service "
            "took 400ms); at worst 20s (sa.service's stop, not counted: systemd never times it out "
            "(TimeoutStopSec=infinity), then sb.service's 20s health timeout; past it berth "
            "gives up and the port stays dark)");
  e.stop_unit = "sb.service";  // a restart: its start times hold its stop
  e.stop_timeout_ms = 0;
  EXPECT_EQ(DarkEstimateText(e),
            "about 400ms (the last start of sb.service took 400ms); at worst 20s (its stop, not "
            "counted: its stop timeout is not known, then its 20s health timeout; past it berth "
            "gives up and the port stays dark)");
}

INSTANTIATE_TEST_SUITE_P(Examples, GoldenTest,
                         ::testing::Combine(::testing::Values("blackwell-8x", "single-gpu"),
                                            ::testing::Values("txt", "diff.txt", "json")),
                         [](const auto& param_info) {
                           std::string n =
                               std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param);
                           for (char& c : n)
                             if (c == '-' || c == '.') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace berth
