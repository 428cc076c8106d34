// The reasons a saved plan is refused, as the operator reads them, and the saved plans berth
// refuses to read at all: a file berth did not write whole (an unknown field, a key twice, a
// byte-order mark, a reason it does not know, no fingerprints) is refused naming what is wrong,
// never half-read.
#include "engine/apply/saved_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <functional>

#include <nlohmann/json.hpp>

#include "core/json_scan.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SavedPlanStaleness, AnOldPlanSaysHowOldItIsAndWhatMaxAgeAllows) {
  SavedPlan saved;
  saved.host = "gpu-01";
  saved.manifest_digest = "d";
  saved.created_unix = 1000;
  Observed now;
  now.hostname = "gpu-01";
  // 45 s old with --max-age 30: not "0 minutes old".
  EXPECT_THAT(StaleReasons(saved, "d", "", 0, now, 1045, 30),
              ElementsAre("it was made 45s ago, and --max-age allows 30s"));
  EXPECT_TRUE(StaleReasons(saved, "d", "", 0, now, 1045, 60).empty());
  EXPECT_TRUE(StaleReasons(saved, "d", "", 0, now, 99999, 0).empty());  // 0: no limit
}

TEST(SavedPlanStaleness, APlanFromTheFutureIsRefusedWhateverMaxAgeSays) {
  SavedPlan saved;
  saved.host = "gpu-01";
  saved.manifest_digest = "d";
  saved.created_unix = 1'000'000 + 3600;  // an hour ahead: its age is negative, "under" any limit
  Observed now;
  now.hostname = "gpu-01";
  for (int64_t max_age : {int64_t{60}, int64_t{0}})
    EXPECT_THAT(StaleReasons(saved, "d", "", 0, now, 1'000'000, max_age),
                ElementsAre(HasSubstr("it says it was made 1h from now (more than the 5m")))
        << "--max-age " << max_age;
  // Within the allowance two clocks may disagree by: still valid.
  saved.created_unix = 1'000'000 + 120;
  EXPECT_TRUE(StaleReasons(saved, "d", "", 0, now, 1'000'000, 60).empty());
}

// A plan of two steps on a host with one GPU and port 8000, saved as `berth plan --out` does.
class SavedPlanFile : public ::testing::Test {
 protected:
  SavedPlanFile() {
    Action write = MakeAction(ActionKind::kWriteUnit);
    write.address = "service/chat";
    write.reason = Reason::kUnitMissing;
    write.unit = "vllm-chat.service";
    write.As<UnitFileStep>().content = "[Service]\nExecStart=/bin/true\n";
    Action start = MakeAction(ActionKind::kStart);
    start.address = "service/chat";
    start.reason = Reason::kNotRunning;
    start.unit = "vllm-chat.service";
    start.requires_.ports = {8000};
    start.requires_.gpu_bytes = {{0, 1000}};
    plan_.actions = {write, start};
    observed_.hostname = "gpu-01";
    desired_.digest = std::string(64, 'd');
    json_ = nlohmann::ordered_json::parse(
        SavedPlanToJson(MakeSavedPlan(plan_, desired_, observed_, "/m/berth.yaml", 1'000'000)));
  }
  Result<SavedPlan> Read(const std::string& text) { return SavedPlanFromJson(text, "plan.json"); }
  std::string Text() const { return json_.dump(2); }

  Plan plan_;
  Desired desired_;
  Observed observed_;
  nlohmann::ordered_json json_;
};

TEST_F(SavedPlanFile, WhatBerthWritesReadsBackWithItsFingerprints) {
  Result<SavedPlan> p = Read(Text());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->plan.actions.size(), 2u);
  EXPECT_EQ(p->plan.actions[1].reason, Reason::kNotRunning);
  EXPECT_EQ(p->fingerprints, Fingerprint(plan_, observed_));
  EXPECT_TRUE(StaleReasons(*p, desired_.digest, "", 0, observed_, 1'000'010, 60).empty());
}

TEST(SavedPlanEngineCheck, AnEngineCheckReadsBackWithItsArgvAndEnvironment) {
  Action check = MakeAction(ActionKind::kPreflight);
  check.address = "service/chat";
  check.reason = Reason::kEngineCheck;
  check.unit = "vllm-chat.service";
  check.As<PreflightStep>().engine = "vllm";
  check.As<PreflightStep>().check_program = "vllm_check.py";
  check.As<PreflightStep>().argv = {"/opt/venv/bin/vllm", "serve", "/models/x", "--port", "8000"};
  check.As<PreflightStep>().env = {"CUDA_VISIBLE_DEVICES=0", "HF_HUB_OFFLINE=1", "A=b=c"};
  check.As<PreflightStep>().env_file = "/etc/berth/chat.env";
  check.As<PreflightStep>().timeout_ms = 300'000;
  Plan plan;
  plan.actions = {check};
  Observed observed;
  observed.hostname = "gpu-01";
  Desired desired;
  desired.digest = std::string(64, 'd');
  Result<SavedPlan> p = SavedPlanFromJson(
      SavedPlanToJson(MakeSavedPlan(plan, desired, observed, "/m/berth.yaml", 1'000'000)),
      "plan.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->plan.actions.size(), 1u);
  const Action& back = p->plan.actions[0];
  EXPECT_EQ(back.reason, Reason::kEngineCheck);
  EXPECT_EQ(back.As<PreflightStep>().engine, "vllm");
  EXPECT_EQ(back.As<PreflightStep>().check_program, check.As<PreflightStep>().check_program);
  EXPECT_EQ(back.As<PreflightStep>().argv, check.As<PreflightStep>().argv);
  EXPECT_EQ(back.As<PreflightStep>().env, check.As<PreflightStep>().env);
  EXPECT_EQ(back.As<PreflightStep>().env_file, check.As<PreflightStep>().env_file);
  EXPECT_TRUE(PlanDifferences(p->plan, plan).empty());
  // A plan whose check would run with another environment is not the saved one.
  Plan other = plan;
  other.actions[0].As<PreflightStep>().env.push_back("PYTHONPATH=/elsewhere");
  EXPECT_THAT(PlanDifferences(p->plan, other),
              ElementsAre(HasSubstr("step 1 (preflight service/chat): its environment is not "
                                    "what berth would do now")));
}

// A relative floor's reference step and the ratios of its gate read back as written; a saved
// plan whose gate compares with another unit is not the plan berth makes now.
TEST(SavedPlanFloor, ARelativeFloorAndItsReferenceReadBack) {
  Action ref = MakeAction(ActionKind::kReference, "service/kimi", Reason::kFloorReference);
  ref.unit = "vllm-kimi.service";
  ref.As<FloorStep>().host = "127.0.0.1";
  ref.As<FloorStep>().port = 8000;
  ref.As<FloorStep>().served_name = "kimi";
  ref.As<FloorStep>().concurrency = 32;
  ref.As<FloorStep>().duration_ms = 30'000;
  Action gate = MakeAction(ActionKind::kFloor, "service/minimax", Reason::kFloorGate);
  gate.unit = "vllm-minimax.service";
  gate.As<FloorStep>() = ref.As<FloorStep>();
  gate.As<FloorStep>().served_name = "minimax";
  gate.As<FloorStep>().rel_output_tps = 0.9;
  gate.As<FloorStep>().rel_ttft_p50 = 1.1;
  gate.As<FloorStep>().rel_ttft_p99 = 1.5;
  gate.As<FloorStep>().rel_tpot_p50 = 1.2;
  gate.As<FloorStep>().reference_unit = "vllm-kimi.service";
  gate.As<FloorStep>().refuse_without_reference = true;
  gate.As<FloorStep>().rel_goodput = 0.95;
  gate.As<FloorStep>().goodput_ttft_ms = 500;
  gate.As<FloorStep>().goodput_tpot_ms = 50;
  gate.As<FloorStep>().goodput_e2el_ms = 9000;
  gate.As<FloorStep>().min_goodput_rps = 2.5;
  gate.As<FloorStep>().commit = std::string(40, 'b');
  gate.As<FloorStep>().settings = "restart-keys:" + std::string(64, 'e');
  GateFigures& rec = gate.As<FloorStep>().recorded;
  rec.time = "2026-12-02T15:04:05Z";
  rec.unit = "vllm-kimi.service";
  rec.source = "floor";
  rec.commit = std::string(40, 'a');
  rec.settings = "restart-keys:" + std::string(64, 'f');
  rec.concurrency = 32;
  rec.max_tokens = 256;
  rec.goodput_ttft_ms = 500;
  rec.seconds = 30.5;
  rec.requests = 310;
  rec.errors = 1;
  rec.output_tps = 1239.5;
  rec.ttft_p50_ms = 180.25;
  rec.ttft_p99_ms = 420;
  rec.tpot_p50_ms = 25.5;
  rec.has_goodput = true;
  rec.goodput_rps = 9.75;
  Plan plan;
  plan.actions = {ref, gate};
  Observed observed;
  observed.hostname = "gpu-01";
  Desired desired;
  desired.digest = std::string(64, 'd');
  Result<SavedPlan> p = SavedPlanFromJson(
      SavedPlanToJson(MakeSavedPlan(plan, desired, observed, "/m/berth.yaml", 1'000'000)),
      "plan.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->plan.actions.size(), 2u);
  EXPECT_EQ(p->plan.actions[0].kind, ActionKind::kReference);
  EXPECT_EQ(p->plan.actions[0].reason, Reason::kFloorReference);
  EXPECT_EQ(p->plan.actions[0].As<FloorStep>(), ref.As<FloorStep>());
  EXPECT_EQ(p->plan.actions[1].As<FloorStep>(), gate.As<FloorStep>());
  EXPECT_TRUE(PlanDifferences(p->plan, plan).empty());
  Plan other = plan;
  other.actions[1].As<FloorStep>().reference_unit = "vllm-other.service";
  EXPECT_THAT(PlanDifferences(p->plan, other),
              ElementsAre(HasSubstr("step 2 (floor service/minimax): its floor's reference is "
                                    "not what berth would do now")));
  // Recorded figures that differ (berth measured again since) make another plan.
  other = plan;
  other.actions[1].As<FloorStep>().recorded.output_tps = 1000;
  EXPECT_THAT(PlanDifferences(p->plan, other),
              ElementsAre(HasSubstr("its floor's recorded reference is not what berth would do")));
  // A recorded reference without one of its fields is refused, naming the step.
  auto j = nlohmann::ordered_json::parse(
      SavedPlanToJson(MakeSavedPlan(plan, desired, observed, "/m/berth.yaml", 1'000'000)));
  j["actions"][1]["step"]["recorded"].erase("output_tps");
  Result<SavedPlan> bad = SavedPlanFromJson(j.dump(), "plan.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("step 2 (floor) has the step field 'recorded'"));
}

TEST_F(SavedPlanFile, AKeyWrittenTwiceIsRefusedNamingIt) {
  // A reviewer's tool shows the first "content", berth would write the last.
  std::string text = Text();
  std::string key = "\"content\": ";
  size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  text.insert(at, key + "\"[Service]\\nExecStart=/usr/bin/harmless\\n\",\n      ");
  Result<SavedPlan> p = Read(text);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("the key 'content' appears twice in one object (in actions[].step)"));
  EXPECT_THAT(p.status().message(), HasSubstr("make the plan again with `berth plan --out`"));
  // Top level too.
  std::string top = Text();
  top.insert(top.find("\"host\""), "\"host\": \"gpu-02\",\n  ");
  Result<SavedPlan> twice = Read(top);
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("the key 'host' appears twice in one object"));
}

// (berth apply FILE checks MissingFingerprints once the actions are the ones berth makes now:
// tests/engine/reconciler_test.cc.)
TEST_F(SavedPlanFile, EmptyOrMissingFingerprintsAreRefused) {
  json_["fingerprints"] = nlohmann::ordered_json::object();
  Result<SavedPlan> empty = Read(Text());
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.status().message(), HasSubstr("its fingerprints are empty"));
  // One dropped: the plan's start needs port 8000, which apply could no longer compare.
  json_ = nlohmann::ordered_json::parse(
      SavedPlanToJson(MakeSavedPlan(plan_, desired_, observed_, "/m/berth.yaml", 1'000'000)));
  json_["fingerprints"].erase("port/8000");
  Result<SavedPlan> partial = Read(Text());
  ASSERT_TRUE(partial.ok()) << partial.status().message();
  EXPECT_THAT(MissingFingerprints(*partial),
              ElementsAre(HasSubstr("it carries no fingerprint of port/8000, which its actions "
                                    "depend on")));
  EXPECT_TRUE(
      MissingFingerprints(MakeSavedPlan(plan_, desired_, observed_, "/m/berth.yaml", 1'000'000))
          .empty());
  json_["fingerprints"]["port/8000"] = "not a digest";
  EXPECT_THAT(Read(Text()).status().message(),
              HasSubstr("fingerprints.port/8000 is not a sha256 digest"));
}

TEST_F(SavedPlanFile, AnUnknownFieldIsRefusedNamingIt) {
  nlohmann::ordered_json top = json_;
  top["approved_by"] = "ops";
  EXPECT_THAT(Read(top.dump(2)).status().message(),
              HasSubstr("the plan has the field 'approved_by', which this berth does not write"));
  nlohmann::ordered_json action = json_;
  action["actions"][1]["exec_start_pre"] = "/bin/sh -c evil";
  EXPECT_THAT(Read(action.dump(2)).status().message(),
              HasSubstr("step 2 has the field 'exec_start_pre'"));
  nlohmann::ordered_json nested = json_;
  nested["state"]["serial_override"] = 7;
  EXPECT_THAT(Read(nested.dump(2)).status().message(),
              HasSubstr("state has the field 'serial_override'"));
  nlohmann::ordered_json resources = json_;
  resources["actions"][1]["requires"]["cpus"] = 4;
  EXPECT_THAT(Read(resources.dump(2)).status().message(),
              HasSubstr("step 2 requires has the field 'cpus'"));
}

TEST_F(SavedPlanFile, AByteOrderMarkIsRefused) {
  Result<SavedPlan> p = Read("\xEF\xBB\xBF" + Text());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("it starts with a UTF-8 byte-order mark, which berth never writes"));
}

// nlohmann's parser recurses once per level: a plan nested 60,000 deep overflowed its stack
// (SIGSEGV in `berth apply FILE`). Refused before parsing, in words; 512 levels still parse.
TEST_F(SavedPlanFile, APlanNestedDeeperThanBerthWritesIsRefusedWithoutCrashing) {
  for (size_t levels : {size_t{60000}, kMaxJsonDepth + 1}) {
    std::string deep = "{\"actions\": " + std::string(levels, '[') + std::string(levels, ']') + "}";
    Result<SavedPlan> p = Read(deep);
    ASSERT_FALSE(p.ok()) << levels;
    EXPECT_THAT(p.status().message(), HasSubstr("nests arrays and objects deeper than 512 levels"));
  }
  // Brackets inside a string are not nesting.
  nlohmann::ordered_json quoted = json_;
  quoted["actions"][0]["detail"] = std::string(70000, '[') + "\"" + std::string(10, '{');
  EXPECT_TRUE(Read(quoted.dump(2)).ok()) << Read(quoted.dump(2)).status().message();
}

TEST_F(SavedPlanFile, AnUnknownReasonIsRefusedNotTakenForAMissingModel) {
  json_["actions"][1]["reason"] = "operator_said_so";
  Result<SavedPlan> p = Read(Text());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("step 2 (start) has the reason 'operator_said_so', which this berth "
                        "does not know"));
  json_["actions"][1]["reason"] = "floor_reference";  // the last reason there is: known
  EXPECT_TRUE(Read(Text()).ok());
}

// A plan saved by a berth before switches were saved (format 1) says so, and how to make it
// again: this berth would run it without the switches its executor undoes.
// A step's payload of the wrong shape is refused naming the step and the field.
TEST_F(SavedPlanFile, AStepFieldOfTheWrongTypeOrShapeIsRefusedNamingIt) {
  json_["actions"][1]["step"] = nlohmann::ordered_json::array();
  Result<SavedPlan> p = Read(Text());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("step 2 (start): its step is not an object"));
  json_ = nlohmann::ordered_json::parse(
      SavedPlanToJson(MakeSavedPlan(plan_, desired_, observed_, "/m/berth.yaml", 1'000'000)));
  json_["actions"][1]["step"]["gpus"] = "all";
  p = Read(Text());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              HasSubstr("step 2 (start) has the step field 'gpus' of the wrong type (string)"));
}

// Format 2 carried every step's fields flat, before each step had its own typed payload; format
// 3 had no goodput or recorded reference in a floor.
TEST_F(SavedPlanFile, APlanOfAnOlderFormatIsRefusedSayingItIsOlder) {
  for (int old : {1, 2, 3}) {
    json_["format_version"] = old;
    Result<SavedPlan> p = Read(Text());
    ASSERT_FALSE(p.ok());
    EXPECT_THAT(p.status().message(),
                HasSubstr("this plan was saved by an older berth (format " + std::to_string(old) +
                          "); make it again with `berth plan --out`"));
  }
}

namespace {

// kimi stops (its own gate kept on the switch), minimax starts side by side with nothing: a
// stop-first switch with everything a saved plan carries.
Plan StopFirstPlan() {
  Plan plan;
  auto act = [](ActionKind k, const std::string& name) {
    Action a = MakeAction(k);
    a.address = "service/" + name;
    a.unit = name + ".service";
    return a;
  };
  Action stop = act(ActionKind::kStop, "kimi");
  stop.takes_down = true;
  Action start = act(ActionKind::kStart, "minimax");
  Action gate = act(ActionKind::kWaitHealthy, "minimax");
  gate.As<HealthStep>().port = 8000;
  gate.As<HealthStep>().timeout_ms = 60'000;
  plan.actions = {stop, start, gate};
  Switch sw;
  sw.address = "service/minimax";
  sw.unit = "minimax.service";
  sw.mode = SwitchMode::kStopFirst;
  sw.steps = {0, 1, 2};
  sw.start = 1;
  sw.gates = {2};
  sw.health_gate = 2;
  Replaced old;
  old.address = "service/kimi";
  old.unit = "kimi.service";
  old.stop_step = 0;
  old.gate.port = 8000;
  old.gate.path = "/health";
  old.gate.served_name = "kimi";
  old.gate.timeout_ms = 600'000;
  old.gate.interval_ms = 5'000;
  sw.replaces = {old};
  sw.needs_turn = true;
  plan.switches = {sw};
  return plan;
}

Result<SavedPlan> RoundTrip(const Plan& plan) {
  Observed observed;
  observed.hostname = "gpu-01";
  Desired desired;
  desired.digest = std::string(64, 'd');
  return SavedPlanFromJson(
      SavedPlanToJson(MakeSavedPlan(plan, desired, observed, "/m/berth.yaml", 1'000'000)),
      "plan.json");
}

}  // namespace

TEST(SavedPlanSwitches, AStopFirstSwitchReadsBackWithWhatItReplacesAndItsGate) {
  Plan plan = StopFirstPlan();
  Result<SavedPlan> p = RoundTrip(plan);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->plan.switches.size(), 1u);
  const Switch& sw = p->plan.switches[0];
  EXPECT_EQ(sw.mode, SwitchMode::kStopFirst);
  EXPECT_EQ(sw.steps, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(sw.start, 1u);
  EXPECT_EQ(sw.gates, (std::vector<size_t>{2}));
  EXPECT_TRUE(sw.needs_turn);
  EXPECT_EQ(sw.group, -1);
  ASSERT_EQ(sw.replaces.size(), 1u);
  const Replaced& r = sw.replaces[0];
  EXPECT_EQ(r.unit, "kimi.service");
  EXPECT_EQ(r.stop_step, 0u);
  EXPECT_EQ(r.gate.port, 8000);
  EXPECT_EQ(r.gate.path, "/health");
  EXPECT_EQ(r.gate.served_name, "kimi");
  EXPECT_EQ(r.gate.timeout_ms, 600'000u);
  EXPECT_EQ(r.gate.interval_ms, 5'000u);
  EXPECT_TRUE(p->plan.actions[0].takes_down);
  EXPECT_FALSE(p->plan.actions[1].takes_down);
  EXPECT_TRUE(PlanDifferences(p->plan, plan).empty());
  // Another undo is another plan, though every action is the same.
  Plan other = plan;
  other.switches[0].replaces[0].gate.timeout_ms = 1;
  EXPECT_THAT(PlanDifferences(p->plan, other), ElementsAre(HasSubstr("its switches")));
}

TEST(SavedPlanSwitches, WhatTheExecutorReadsInsteadOfWorkingItOutReadsBack) {
  Plan plan = StopFirstPlan();
  plan.switches[0].front_port = 8000;
  plan.switches[0].front_socket = "/run/berth/fronts/8000.sock";
  plan.switches[0].undo_route = "kimi";
  Replaced& r = plan.switches[0].replaces[0];
  r.asleep = true;
  r.wake.host = "127.0.0.1";
  r.wake.port = 8000;
  r.wake.timeout_ms = 60'000;
  Action download = MakeAction(ActionKind::kDownload, "model/a");
  plan.actions.insert(plan.actions.begin(), {download, download});
  for (size_t* i : {&plan.switches[0].start, &*plan.switches[0].health_gate,
                    &plan.switches[0].replaces[0].stop_step})
    *i += 2;
  for (size_t& i : plan.switches[0].steps) i += 2;
  for (size_t& i : plan.switches[0].gates) i += 2;
  plan.downloads = {{0, 1}};
  Result<SavedPlan> p = RoundTrip(plan);
  ASSERT_TRUE(p.ok()) << p.status().message();
  const Switch& sw = p->plan.switches[0];
  EXPECT_EQ(sw.health_gate, std::optional<size_t>(4));
  EXPECT_EQ(sw.front_socket, "/run/berth/fronts/8000.sock");
  EXPECT_EQ(sw.replaces[0].wake, r.wake);
  EXPECT_EQ(p->plan.downloads, (std::vector<DownloadBatch>{{0, 1}}));
  EXPECT_TRUE(PlanDifferences(p->plan, plan).empty());
  Plan other = plan;
  other.downloads.clear();
  EXPECT_THAT(PlanDifferences(p->plan, other), ElementsAre(HasSubstr("side-by-side")));
}

TEST(SavedPlanSwitches, ASideBySideGroupReadsBack) {
  Plan plan = StopFirstPlan();
  ParallelGroup g;
  g.first = 1;
  g.last = 2;
  g.chains = {{1, 2, 2}};
  plan.groups = {g};
  plan.switches[0].group = 0;
  Result<SavedPlan> p = RoundTrip(plan);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->plan.groups.size(), 1u);
  EXPECT_EQ(p->plan.groups[0].chains, (std::vector<Chain>{{1, 2, 2}}));
  EXPECT_EQ(p->plan.switches[0].group, 0);
}

// What the executor runs on instead of working it out cannot be pointed elsewhere by an edit: a
// health gate, a chain's gate or a download batch naming a step of another kind is refused.
TEST(SavedPlanSwitches, AnEditThatPointsTheExecutorsFactsAtTheWrongStepsIsRefused) {
  Observed observed;
  observed.hostname = "gpu-01";
  Desired desired;
  desired.digest = std::string(64, 'd');
  Plan plan = StopFirstPlan();
  ParallelGroup g;
  g.first = 1;
  g.last = 2;
  g.chains = {{1, 2, 2}};
  plan.groups = {g};
  const auto saved = nlohmann::ordered_json::parse(
      SavedPlanToJson(MakeSavedPlan(plan, desired, observed, "/m/berth.yaml", 1'000'000)));
  auto refused = [&](const std::function<void(nlohmann::ordered_json&)>& edit) {
    nlohmann::ordered_json j = saved;
    edit(j);
    Result<SavedPlan> p = SavedPlanFromJson(j.dump(2), "plan.json");
    return p.ok() ? std::string("accepted") : p.status().message();
  };
  EXPECT_THAT(refused([](auto& j) { j["switches"][0]["health_gate"] = 0; }),
              HasSubstr("switch 1 names step 1 as its health gate, which it is not"));
  EXPECT_THAT(refused([](auto& j) {
                j["groups"][0]["chains"][0] = {1, 1, 2};
              }),
              HasSubstr("group 1 has a chain outside its steps"));
  EXPECT_THAT(refused([](auto& j) {
                j["groups"][0]["chains"][0] = {1, 2};
              }),
              HasSubstr("group 1 has a chain that is not [start, gate, last]"));
  EXPECT_THAT(refused([](auto& j) {
                j["downloads"] = {{0, 1}};
              }),
              HasSubstr("download batch 1 names steps that are not two or more downloads"));
  EXPECT_THAT(refused([](auto& j) {
                j["downloads"] = {{0, 9}};
              }),
              HasSubstr("download batch 1 names step 10 of a plan of 3"));
  EXPECT_THAT(refused([](auto& j) {
                j["downloads"] = {{1, 0}};
              }),
              HasSubstr("download batch 1 names steps that are not two or more downloads"));
  EXPECT_THAT(refused([](auto& j) { j["switches"][0]["health_gate"] = 1e30; }),
              HasSubstr("switch 1 names a step that is not a step number"));
  EXPECT_THAT(refused([](auto& j) { j["switches"][0]["health_gate"] = -1; }),
              HasSubstr("switch 1 names a step that is not a step number"));
  EXPECT_EQ(refused([](auto&) {}), "accepted");
}

TEST(SavedPlanSwitches, ASwitchNamingAStepThePlanLacksIsRefused) {
  Observed observed;
  observed.hostname = "gpu-01";
  Desired desired;
  desired.digest = std::string(64, 'd');
  auto j = nlohmann::ordered_json::parse(SavedPlanToJson(
      MakeSavedPlan(StopFirstPlan(), desired, observed, "/m/berth.yaml", 1'000'000)));
  j["switches"][0]["gates"] = {7};
  Result<SavedPlan> p = SavedPlanFromJson(j.dump(2), "plan.json");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("switch 1 names step 8 of a plan of 3"));
  j["switches"][0]["gates"] = {2};
  j["switches"][0]["mode"] = "sideways";
  p = SavedPlanFromJson(j.dump(2), "plan.json");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("the mode 'sideways'"));
}

// A prewarm step reads back as written; a saved plan whose prewarm reads another folder (a
// hand edit pointing it at /etc) is not the plan berth makes now, and never runs.
TEST(SavedPlanPrewarm, APrewarmReadsBackAndAnotherFolderIsRefused) {
  Action pre = MakeAction(ActionKind::kPrewarm, "model/minimax", Reason::kPrewarm);
  pre.unit = "vllm-minimax.service";
  pre.As<PrewarmStep>().snapshot = "/models/models--org--minimax/snapshots/" + std::string(40, 'a');
  pre.As<PrewarmStep>().bytes = 230'000'000'000;
  Plan plan;
  plan.actions = {pre};
  Observed observed;
  observed.hostname = "gpu-01";
  Desired desired;
  desired.digest = std::string(64, 'd');
  std::string text =
      SavedPlanToJson(MakeSavedPlan(plan, desired, observed, "/m/berth.yaml", 1'000'000));
  Result<SavedPlan> p = SavedPlanFromJson(text, "plan.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->plan.actions.size(), 1u);
  EXPECT_EQ(p->plan.actions[0].kind, ActionKind::kPrewarm);
  EXPECT_EQ(p->plan.actions[0].reason, Reason::kPrewarm);
  EXPECT_EQ(p->plan.actions[0].As<PrewarmStep>(), pre.As<PrewarmStep>());
  EXPECT_TRUE(PlanDifferences(p->plan, plan).empty());
  auto j = nlohmann::ordered_json::parse(text);
  j["actions"][0]["step"]["snapshot"] = "/etc";
  Result<SavedPlan> edited = SavedPlanFromJson(j.dump(), "plan.json");
  ASSERT_TRUE(edited.ok()) << edited.status().message();
  EXPECT_THAT(PlanDifferences(edited->plan, plan),
              ElementsAre(HasSubstr("step 1 (prewarm model/minimax): its snapshot it reads ahead "
                                    "is not what berth would do now")));
  // A field no prewarm has is refused, naming the step.
  j = nlohmann::ordered_json::parse(text);
  j["actions"][0]["step"]["argv"] = {"rm", "-rf", "/"};
  EXPECT_FALSE(SavedPlanFromJson(j.dump(), "plan.json").ok());
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

// A standby's sleep and wake read back as written, with the switch's undo that wakes it; a
// sleep edited to reach another port is not the plan berth makes now; a wrong type is refused.
TEST(SavedPlanStandby, ASleepAndAWakeReadBackAndAnEditedPortIsRefused) {
  Action sleep = MakeAction(ActionKind::kSleep, "service/a", Reason::kStandby);
  sleep.unit = "a.service";
  sleep.takes_down = true;
  StandbyStep& st = sleep.As<StandbyStep>();
  st.host = "127.0.0.1";
  st.port = 8000;
  st.timeout_ms = 1'800'000;
  st.gpus = {0, 1};
  st.residual_bytes = 3'000'000'000;
  st.memory_bytes = 140'000'000'000;
  sleep.frees.gpu_bytes = {{0, 70'000'000'000}, {1, 70'000'000'000}};
  Action wake = MakeAction(ActionKind::kWake, "service/b", Reason::kAsleep);
  wake.unit = "b.service";
  wake.As<StandbyStep>().host = "127.0.0.1";
  wake.As<StandbyStep>().port = 8001;
  wake.As<StandbyStep>().gpus = {0, 1};
  Plan plan;
  plan.actions = {sleep, wake};
  Switch sw;
  sw.address = "service/b";
  sw.unit = "b.service";
  sw.mode = SwitchMode::kStopFirst;
  sw.steps = {0, 1};
  sw.start = 1;
  Replaced r;
  r.address = "service/a";
  r.unit = "a.service";
  r.stop_step = 0;
  r.asleep = true;
  r.gate.port = 8000;
  sw.replaces = {r};
  plan.switches = {sw};
  Observed observed;
  observed.hostname = "gpu-01";
  Desired desired;
  desired.digest = std::string(64, 'd');
  std::string text =
      SavedPlanToJson(MakeSavedPlan(plan, desired, observed, "/m/berth.yaml", 1'000'000));
  Result<SavedPlan> p = SavedPlanFromJson(text, "plan.json");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->plan.actions.size(), 2u);
  EXPECT_EQ(p->plan.actions[0].kind, ActionKind::kSleep);
  EXPECT_EQ(p->plan.actions[0].reason, Reason::kStandby);
  EXPECT_EQ(p->plan.actions[0].As<StandbyStep>(), st);
  EXPECT_EQ(p->plan.actions[1].kind, ActionKind::kWake);
  EXPECT_EQ(p->plan.actions[1].reason, Reason::kAsleep);
  ASSERT_EQ(p->plan.switches.size(), 1u);
  EXPECT_TRUE(p->plan.switches[0].replaces.at(0).asleep);
  EXPECT_TRUE(PlanDifferences(p->plan, plan).empty());
  auto j = nlohmann::ordered_json::parse(text);
  j["actions"][0]["step"]["port"] = 22;
  Result<SavedPlan> edited = SavedPlanFromJson(j.dump(), "plan.json");
  ASSERT_TRUE(edited.ok()) << edited.status().message();
  EXPECT_THAT(PlanDifferences(edited->plan, plan),
              ElementsAre(HasSubstr("step 1 (sleep service/a)")));
  j = nlohmann::ordered_json::parse(text);
  j["actions"][0]["step"]["level"] = "2";
  Result<SavedPlan> wrong = SavedPlanFromJson(j.dump(), "plan.json");
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("step field 'level' of the wrong type"));
  j = nlohmann::ordered_json::parse(text);
  j["switches"][0]["replaces"][0]["asleep"] = "yes";
  EXPECT_FALSE(SavedPlanFromJson(j.dump(), "plan.json").ok());
}

}  // namespace
}  // namespace berth
