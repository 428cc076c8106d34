// Fronts in the plan (planners/fronts.h): a port held by HAProxy while the services behind it
// change. The manifest goes through the loader (which moves fronted services to backend ports and
// adds each front's own service); each scenario asserts the steps in order, the port's line
// (held, or no disruption), and converges.
#include "manifests/loader.h"
#include "planners/fronts.h"
#include "tests/planners/scenario_fixture.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class FrontPlanTest : public ScenarioTest {
 protected:
  void SetUp() override {
    Gpus(2, GiB(141));
    InStore("org/a", Commit("a"), 1000);
    InStore("org/b", Commit("b"), 1000);
  }
  // svc-a and svc-b on port 8000 behind a front; `b_gpu`: svc-b's GPU (0: svc-a's, no room).
  void Load(const std::string& a_state, const std::string& b_state, int b_gpu = 1,
            const std::string& a_extra = "", const std::string& front = "{hold: 5m, drain: 1m}") {
    std::string yaml =
        "berth: 1\n"
        "host: {store: /models, front_dir: /run/fronts}\n"
        "fronts:\n  8000: " +
        front +
        "\n"
        "models:\n"
        "  a: {source: hf://org/a, revision: " +
        Commit("a") +
        "}\n"
        "  b: {source: hf://org/b, revision: " +
        Commit("b") +
        "}\n"
        "services:\n"
        "  svc-a: {model: a, engine: vllm, gpus: [0], port: 8000, state: " +
        a_state + a_extra +
        "}\n"
        "  svc-b: {model: b, engine: vllm, gpus: [" +
        std::to_string(b_gpu) + "], port: 8000, state: " + b_state + "}\n";
    LoadResult r = LoadManifestTexts({{"berth.yaml", yaml}});
    ASSERT_TRUE(r.ok()) << r.diagnostics[0].message;
    d = r.desired;
  }
  static std::string Port(const Plan& p, int port) {
    std::string s;
    for (const Disruption& dis : p.disruptions)
      if (dis.port == port) s += (dis.front_mode.empty() ? "dark" : dis.front_mode) + " ";
    return s;
  }
};

TEST_F(FrontPlanTest, TheLoaderMovesFrontedServicesToLoopbackBackendPortsAndAddsTheFront) {
  Load("running", "stopped");
  const ServiceSpec& a = d.services.at("svc-a");
  EXPECT_EQ(a.front_port, 8000);
  EXPECT_EQ(a.bind, "127.0.0.1");
  ASSERT_TRUE(a.port);
  EXPECT_GE(*a.port, 20000);
  EXPECT_LT(*a.port, 30000);
  EXPECT_NE(*a.port, *d.services.at("svc-b").port);
  const ServiceSpec& front = d.services.at("berth-front-8000");
  EXPECT_TRUE(front.is_front);
  EXPECT_EQ(*front.port, 8000);
  EXPECT_THAT(front.command, ElementsAre("/usr/sbin/haproxy", "-W", "-f", "/run/fronts/8000.cfg",
                                         "-S", "/run/fronts/8000.master"));
  // The same manifest gives the same ports.
  int port = *a.port;
  Load("running", "stopped");
  EXPECT_EQ(*d.services.at("svc-a").port, port);
}

TEST_F(FrontPlanTest, TheFirstApplyStartsTheFrontThenTheBackendAndRoutesToIt) {
  Load("running", "stopped");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  std::vector<std::string> steps = Steps(p);
  auto at = [&](const std::string& s) {
    return std::find(steps.begin(), steps.end(), s) - steps.begin();
  };
  ASSERT_LT(at("write-front front/8000 unit_changed"),
            at("start service/berth-front-8000 not_running"))
      << ::testing::PrintToString(steps);
  EXPECT_LT(at("start service/berth-front-8000 not_running"),
            at("start service/svc-a not_running"));
  EXPECT_LT(at("wait-healthy service/svc-a health_gate"), at("route front/8000 health_gate"));
  EXPECT_EQ(At(p, "route front/8000 health_gate").As<FrontStep>().server, "svc-a");
  Converge();
  EXPECT_EQ(ActiveNow(d, o, 8000), "svc-a");
}

TEST_F(FrontPlanTest, WithRoomForBothTheSwitchIsMakeBeforeBreak) {
  Load("running", "absent");
  Converge();
  Load("stopped", "running", 1);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  std::vector<std::string> steps = Steps(p);
  std::vector<std::string> switching;
  for (const auto& s : steps)
    if (s.find("svc-") != std::string::npos || s.find("front/") != std::string::npos)
      switching.push_back(s);
  EXPECT_THAT(
      switching,
      ElementsAre(
          "write-unit unit/svc-b.service unit_missing", "write-front front/8000 unit_changed",
          "start service/svc-b not_running", "wait-healthy service/svc-b health_gate",
          "route front/8000 health_gate", "drain service/svc-a frees_resources",
          "stop service/svc-a frees_resources", "enable unit/svc-b.service not_enabled",
          "disable unit/svc-a.service wanted_stopped", "write-front front/8000 unit_changed"));
  EXPECT_TRUE(At(p, "write-front front/8000 unit_changed").As<FrontStep>().reload);
  EXPECT_EQ(Port(p, 8000), "none ");
  Converge();
  EXPECT_EQ(ActiveNow(d, o, 8000), "svc-b");
}

TEST_F(FrontPlanTest, WithoutRoomTheFrontHoldsWhileTheOldStopsAndTheNewStarts) {
  Load("running", "absent");
  Converge();
  Load("stopped", "running", 0);  // svc-b on svc-a's GPU: 2 × 0.9 do not fit
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  std::vector<std::string> switching;
  for (const auto& s : Steps(p))
    if (s.find("svc-") != std::string::npos || s.find("front/") != std::string::npos)
      switching.push_back(s);
  EXPECT_THAT(
      switching,
      ElementsAre("write-unit unit/svc-b.service unit_missing",
                  "write-front front/8000 unit_changed", "route front/8000 health_gate",
                  "drain service/svc-a frees_resources", "stop service/svc-a frees_resources",
                  "start service/svc-b not_running", "wait-healthy service/svc-b health_gate",
                  "route front/8000 health_gate", "enable unit/svc-b.service not_enabled",
                  "disable unit/svc-a.service wanted_stopped",
                  "write-front front/8000 unit_changed"));
  EXPECT_EQ(At(p, "route front/8000 health_gate").As<FrontStep>().server,
            "hold");  // the first route
  EXPECT_EQ(Port(p, 8000), "held ");
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].hold_ms, 5u * 60 * 1000);
  Converge();
  EXPECT_EQ(ActiveNow(d, o, 8000), "svc-b");
}

TEST_F(FrontPlanTest, ARestartInPlaceIsHeldNotDark) {
  Load("running", "stopped");
  Converge();
  Load("running", "stopped", 1, ", env: {X: '1'}");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  std::vector<std::string> switching;
  for (const auto& s : Steps(p))
    if (s.find("svc-a") != std::string::npos || s.find("front/") != std::string::npos)
      switching.push_back(s);
  EXPECT_THAT(
      switching,
      ElementsAre("write-unit unit/svc-a.service unit_changed", "route front/8000 health_gate",
                  "drain service/svc-a frees_resources", "restart service/svc-a config_changed",
                  "wait-healthy service/svc-a health_gate", "route front/8000 health_gate"));
  EXPECT_EQ(Port(p, 8000), "held ");
  Converge();
}

// An outside load balancer is told first: the ready path turns 503 (and berth waits its lead)
// before the front holds, under the fleet's turn; it turns 200 again after the route.
TEST_F(FrontPlanTest, TheReadyPathTurnsBeforeTheHoldAndTheTurnIsTakenThere) {
  std::string front = "{hold: 5m, drain: 1m, ready: {path: /ready, lead: 20s}}";
  Load("running", "absent", 1, "", front);
  Converge();
  Load("stopped", "running", 0, "", front);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  std::vector<std::string> fronts;
  for (size_t i = 0; i < p.actions.size(); ++i)
    if (p.actions[i].Holds<FrontStep>())
      fronts.push_back(Steps(p)[i] + (p.actions[i].takes_down ? " (turn)" : "") +
                       (p.actions[i].kind == ActionKind::kReady
                            ? std::string(p.actions[i].As<FrontStep>().ready ? " 200" : " 503")
                            : ""));
  EXPECT_THAT(
      fronts,
      ElementsAre("write-front front/8000 unit_changed", "ready front/8000 health_gate (turn) 503",
                  "route front/8000 health_gate", "drain service/svc-a frees_resources",
                  "route front/8000 health_gate", "ready front/8000 health_gate 200",
                  "write-front front/8000 unit_changed"));
  EXPECT_EQ(At(p, "ready front/8000 health_gate").As<FrontStep>().timeout_ms, 20000u);
  ASSERT_EQ(p.switches.size(), 1u);
  EXPECT_EQ(p.switches[0].mode, SwitchMode::kHold);
  EXPECT_EQ(p.switches[0].undo_route, "svc-a");
  EXPECT_TRUE(p.switches[0].needs_turn);
}

// Make-before-break takes nobody's turn: nothing goes dark, nothing is held.
TEST_F(FrontPlanTest, AMakeBeforeBreakSwitchNeedsNoTurn) {
  Load("running", "absent");
  Converge();
  Load("stopped", "running", 1);
  Plan p = PlanNow();
  ASSERT_EQ(p.switches.size(), 1u);
  EXPECT_EQ(p.switches[0].mode, SwitchMode::kMakeBeforeBreak);
  EXPECT_FALSE(p.switches[0].needs_turn);
  for (const Action& a : p.actions) EXPECT_FALSE(a.takes_down) << a.address;
  ASSERT_EQ(p.switches[0].replaces.size(), 1u);
  EXPECT_EQ(p.switches[0].replaces[0].unit, "svc-a.service");
  EXPECT_EQ(p.switches[0].front_port, 8000);
}

TEST_F(FrontPlanTest, ANoOpPlanWithAFrontIsEmpty) {
  Load("running", "stopped");
  Converge();
  EXPECT_TRUE(PlanNow().empty());
}

TEST_F(FrontPlanTest, ARoutedFrontServesEveryModelOfItsPortAtOnceAndRoutesNone) {
  auto load = [&](const std::string& more) {
    std::string yaml =
        "berth: 1\nhost: {store: /models, front_dir: /run/fronts}\n"
        "fronts:\n  8000: {route: model}\n"
        "models:\n  a: {source: hf://org/a, revision: " +
        Commit("a") + "}\n  b: {source: hf://org/b, revision: " + Commit("b") +
        "}\n"
        "services:\n"
        "  svc-a: {model: a, engine: vllm, gpus: [0], port: 8000, on_demand: true, "
        "vllm: {served_model_name: chat}}\n"
        "  svc-b: {model: b, engine: vllm, gpus: [1], port: 8000, "
        "vllm: {gpu_memory_utilization: 0.4}}\n" +
        more;
    LoadResult r = LoadManifestTexts({{"berth.yaml", yaml}});
    ASSERT_TRUE(r.ok()) << r.diagnostics[0].message;
    d = r.desired;
  };
  load("");
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  std::vector<std::string> steps = Steps(p);
  for (const std::string& step : steps) {
    EXPECT_FALSE(step.starts_with("route ")) << step;  // nothing is switched: each model served
    EXPECT_FALSE(step.starts_with("drain ")) << step;
    EXPECT_NE(step, "start service/svc-a not_running");  // on demand: its socket's requests do
  }
  EXPECT_THAT(steps, ::testing::Contains("start service/svc-b not_running"));
  const std::string config =
      At(p, "write-front front/8000 unit_changed").As<FrontStep>().config_text;
  // svc-a by its served name, at its socket's port; svc-b by its own name, at its backend port.
  const ServiceSpec& a = d.services.at("svc-a");
  const ServiceSpec& b = d.services.at("svc-b");
  EXPECT_THAT(config, HasSubstr(R"({"id":"chat","object":"model")"));
  EXPECT_THAT(config, HasSubstr(R"({"id":"svc-b","object":"model")"));
  EXPECT_THAT(config, HasSubstr("127.0.0.1:" + std::to_string(a.on_demand->public_port)));
  EXPECT_THAT(config, ::testing::Not(HasSubstr("127.0.0.1:" + std::to_string(*a.port))));
  EXPECT_THAT(config, HasSubstr("127.0.0.1:" + std::to_string(*b.port)));
  Converge();
  EXPECT_TRUE(PlanNow().empty()) << ::testing::PrintToString(Steps(PlanNow()));

  // A third model on the port: the running front is rewritten and reloaded; the others stay.
  load(
      "  svc-c: {model: b, engine: vllm, gpus: [1], port: 8000, vllm: {served_model_name: c, "
      "gpu_memory_utilization: 0.4}}\n");
  p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  steps = Steps(p);
  const Action& write = At(p, "write-front front/8000 unit_changed");
  EXPECT_TRUE(write.As<FrontStep>().reload);
  EXPECT_THAT(write.As<FrontStep>().config_text, HasSubstr(R"({"id":"c","object":"model")"));
  EXPECT_THAT(steps, ::testing::Contains("start service/svc-c not_running"));
  for (const std::string& step : steps) EXPECT_EQ(step.find("svc-b"), std::string::npos) << step;
  for (const Disruption& dis : p.disruptions) EXPECT_NE(dis.port, 8000) << dis.reason;
  Converge();

  // svc-b's unit changes: it restarts in place, and the front holds its model's requests.
  d.services.at("svc-b").env["X"] = "1";
  p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  ASSERT_EQ(p.disruptions.size(), 1u);
  EXPECT_EQ(p.disruptions[0].port, 8000);
  EXPECT_EQ(p.disruptions[0].front_mode, "held");
  EXPECT_THAT(p.disruptions[0].reason,
              HasSubstr("requests for svc-b wait at the front while svc-b.service restarts"));
  EXPECT_TRUE(p.disruptions[0].until_step);
}

}  // namespace
}  // namespace berth::testing
