// Engines through a whole plan: what each adapter renders into the unit, and the name each
// service's gates ask /v1/models for (the adapter's ReportedName, not the manifest's name).
#include "tests/planners/scenario_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const Action* Find(const Plan& p, ActionKind kind, const std::string& address) {
  for (const Action& a : p.actions)
    if (a.kind == kind && a.address == address) return &a;
  return nullptr;
}

TEST_F(ScenarioTest, ATrtllmServeServiceRendersItsCommandAndItsGateAsksForTheSnapshotName) {
  OneModel(4);
  ServiceSpec& s = Service("trt", EngineKind::kTrtllm, "a", {0, 1, 2, 3}, 8000);
  s.trtllm.tp_size = 4;
  s.trtllm.ep_size = 2;
  s.trtllm.extra_llm_api_options = "/etc/berth/trt.yaml";
  s.gpu_memory = GiB(120);
  d.executables["trtllm-serve"] = "/opt/trt/bin/trtllm-serve";
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  const Action* unit = Find(p, ActionKind::kWriteUnit, "unit/trt.service");
  ASSERT_NE(unit, nullptr);
  const std::string snapshot = "/models/models--org--a/snapshots/" + Commit("a");
  EXPECT_THAT(unit->As<UnitFileStep>().content,
              HasSubstr("ExecStart=\"/opt/trt/bin/trtllm-serve\" \"serve\" \"" + snapshot +
                        "\" \"--host\" \"0.0.0.0\" \"--port\" \"8000\" \"--tp_size\" \"4\" "
                        "\"--pp_size\" \"1\" \"--ep_size\" \"2\" \"--extra_llm_api_options\" "
                        "\"/etc/berth/trt.yaml\""));
  EXPECT_THAT(unit->As<UnitFileStep>().content, HasSubstr("CUDA_VISIBLE_DEVICES=0,1,2,3"));
  // trtllm-serve cannot be told a name: it lists the snapshot folder's, the commit.
  const Action* gate = Find(p, ActionKind::kWaitHealthy, "service/trt");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->As<HealthStep>().served_name, Commit("a"));
  EXPECT_EQ(gate->As<HealthStep>().path, "/health");
  EXPECT_THAT(gate->detail, HasSubstr("/v1/models lists '" + Commit("a") + "'"));
  Converge();
}

TEST_F(ScenarioTest, TrtllmServesSmokeRequestsAskForTheNameItLists) {
  OneModel(1);
  ServiceSpec& s = Service("trt", EngineKind::kTrtllm, "a", {0}, 8000);
  s.gates.smoke = SmokeSpec{};
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  const Action* smoke = Find(p, ActionKind::kSmoke, "service/trt");
  ASSERT_NE(smoke, nullptr);
  EXPECT_EQ(smoke->As<SmokeStep>().served_name, Commit("a"));
}

TEST_F(ScenarioTest, ACommandWithoutServedNameIsGatedOnItsHealthPathAloneAndSaysSo) {
  Gpus(1, GiB(141));
  Command("tgi", {0}, 9000, GiB(40));
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  const Action* gate = Find(p, ActionKind::kWaitHealthy, "service/tgi");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->As<HealthStep>().served_name, "");
  EXPECT_THAT(gate->detail, HasSubstr("the health path alone"));

  d.services["tgi"].served_name = "meta-llama/Llama-3.1-8B-Instruct";
  p = PlanNow();
  gate = Find(p, ActionKind::kWaitHealthy, "service/tgi");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->As<HealthStep>().served_name, "meta-llama/Llama-3.1-8B-Instruct");
  EXPECT_THAT(gate->detail, HasSubstr("/v1/models lists 'meta-llama/Llama-3.1-8B-Instruct'"));
  EXPECT_THAT(gate->detail, Not(HasSubstr("alone")));
}

TEST_F(ScenarioTest, AnSglangDraftModelIsKeptInTheStoreAndPassedAsItsSnapshot) {
  OneModel(2);
  ModelSpec& draft = Model("head", "org/eagle3-head");
  draft.revision = Commit("e");
  draft.keep = false;  // kept only because a running service drafts with it
  InStore("org/eagle3-head", Commit("e"), 100);
  ServiceSpec& s = Sglang("sg", "a", {0, 1}, 30000, 0.8);
  s.sglang.speculative = {"EAGLE3", 3, 1, 4, "head"};
  s.draft_model = "head";
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  EXPECT_EQ(Find(p, ActionKind::kRemoveModel, "model/head"), nullptr) << "the draft is in use";
  const Action* unit = Find(p, ActionKind::kWriteUnit, "unit/sg.service");
  ASSERT_NE(unit, nullptr);
  EXPECT_THAT(unit->As<UnitFileStep>().content,
              HasSubstr("\"--speculative-algorithm\" \"EAGLE3\" \"--speculative-draft-model-path\" "
                        "\"/models/models--org--eagle3-head/snapshots/" +
                        Commit("e") + "\""));
  Converge();
}

}  // namespace
}  // namespace berth::testing
