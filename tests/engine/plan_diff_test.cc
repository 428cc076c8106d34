// What a reviewer sees of a unit file change: the diff under each write-unit (always for an
// adopted or hand-edited unit, every one with --diff), escaped where the text is not berth's,
// in text and JSON, through `berth plan`, `berth apply` and a saved plan; and the summary line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/hash.h"
#include "engine/apply/reconciler.h"
#include "engine/output/plan_output.h"
#include "providers/systemd/observe_units.h"
#include "tests/providers/temp_dir.h"
#include "tests/support/fake_world.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kHand =
    "[Unit]\nDescription=Kimi, by hand\n\n[Service]\nExecStart=/opt/hand-made/serve --port 8000\n"
    "Restart=always\n";

std::string Manifest(const std::string& extra) {
  return "berth: 1\nhost: {store: /models}\nmodels:\n"
         "  kimi: {source: hf://moonshotai/Kimi-K2, revision: " +
         Commit("a") +
         ", size: 20GB}\n"
         "services:\n"
         "  vllm-kimi:\n"
         "    model: kimi\n"
         "    engine: vllm\n"
         "    gpus: [0]\n"
         "    port: 8000\n"
         "    vllm: {gpu_memory_utilization: 0.9}\n"
         "    health: {timeout: 10m, interval: 5s}\n" +
         extra;
}

Observed Host() {
  Observed o;
  o.hostname = "gpu-01";
  o.store.path = "/models";
  o.store.total_bytes = 2'000'000'000'000;
  o.store.free_bytes = 1'000'000'000'000;
  o.gpus.push_back({0, "GPU-0", "NVIDIA H200", GiB(80), 0, {}});
  return o;
}

class PlanDiffTest : public ::testing::Test {
 protected:
  PlanDiffTest() : world(Host()) {
    dir.Write("kimi/berth.yaml", Manifest(""));
    dir.Write("adopt/berth.yaml", Manifest("    adopt: true\n"));
    dir.Write("longer/berth.yaml", Manifest("    args: [\"--max-num-seqs\", \"64\"]\n"));
  }
  RunReport Pass(const std::string& manifest, bool apply, bool diffs = false,
                 PlanFormat format = PlanFormat::kText, const std::string& out_path = "",
                 const std::string& saved = "") {
    out.str("");
    err.str("");
    Reporter say(out, err, format);
    say.set_diffs(diffs);
    ReconcileOptions o;
    if (saved.empty()) o.manifest_path = dir / (manifest + "/berth.yaml");
    o.saved_plan_path = saved;
    o.out_path = out_path;
    o.state_dir = dir / "state";
    o.apply = apply;
    o.yes = true;
    return Reconciler(world.Deps(&say)).Run(o);
  }
  // A unit someone wrote by hand, where berth would write its own.
  void HandWritten(const std::string& text) {
    ObservedUnit& u = world.host.Unit("vllm-kimi.service");
    u.load_state = "loaded";
    u.fragment_path = "/etc/systemd/system/vllm-kimi.service";
    u.content = text;
    u.content_hash = Sha256Hex(text);
    u.managed = false;
  }
  TempDir dir;
  FakeWorld world;
  std::ostringstream out, err;
};

TEST_F(PlanDiffTest, AdoptShowsTheHandWrittenLinesRemovedAndBerthsAddedWithoutBeingAsked) {
  HandWritten(kHand);
  ASSERT_EQ(Pass("adopt", false).outcome, Outcome::kPlanned) << err.str();
  std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("write-unit    unit/vllm-kimi.service  adopt: true replaces"));
  EXPECT_THAT(text,
              HasSubstr("\n       --- a/vllm-kimi.service\n       +++ b/vllm-kimi.service\n"));
  EXPECT_THAT(text, HasSubstr("\n       -ExecStart=/opt/hand-made/serve --port 8000\n"));
  EXPECT_THAT(text, HasSubstr("\n       -Restart=always\n"));
  EXPECT_THAT(text, HasSubstr("\n       +# Managed by berth"));
  EXPECT_THAT(text, HasSubstr("\n       +Restart=on-failure\n"));
  // Lines both files have are context, not change.
  EXPECT_THAT(text, HasSubstr("\n        [Service]\n"));
  EXPECT_THAT(text, HasSubstr("\nPlan: 1 model to download (20 GB), 1 unit file to write"));
}

TEST_F(PlanDiffTest, ATerminalEscapeInAHandWrittenUnitIsShownEscaped) {
  HandWritten("[Unit]\nDescription=\x1b]0;owned\x07\x1b[2J\r\n[Service]\nExecStart=/bin/x\n");
  ASSERT_EQ(Pass("adopt", false).outcome, Outcome::kPlanned) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("-Description=\\x1b]0;owned\\x07\\x1b[2J\\x0d\n"));
  EXPECT_EQ(out.str().find('\x1b'), std::string::npos) << "a raw ESC reached the terminal";
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
  // JSON escapes it its own way: the reviewer tool gets the bytes, as \u001b.
  ASSERT_EQ(Pass("adopt", false, false, PlanFormat::kJson).outcome, Outcome::kPlanned);
  nlohmann::json doc = nlohmann::json::parse(out.str());
  EXPECT_THAT(doc["resource_changes"][1]["diff"].get<std::string>(),
              HasSubstr("-Description=\x1b]0;owned\x07\x1b[2J\r\n"));
  EXPECT_EQ(out.str().find('\x1b'), std::string::npos);
}

TEST_F(PlanDiffTest, TheJsonPlanCarriesEveryWriteUnitsDiff) {
  HandWritten(kHand);
  ASSERT_EQ(Pass("adopt", false, false, PlanFormat::kJson).outcome, Outcome::kPlanned);
  nlohmann::json doc = nlohmann::json::parse(out.str());
  const nlohmann::json* write = nullptr;
  for (const auto& c : doc["resource_changes"])
    if (c["action"] == "write-unit") write = &c;
  ASSERT_NE(write, nullptr) << out.str();
  EXPECT_EQ((*write)["action_reason"], "unit_adopted");
  std::string diff = (*write)["diff"].get<std::string>();
  EXPECT_EQ(diff.rfind("--- a/vllm-kimi.service\n+++ b/vllm-kimi.service\n@@ -1,6 ", 0), 0u)
      << diff;
  EXPECT_THAT(diff, HasSubstr("\n-ExecStart=/opt/hand-made/serve --port 8000\n"));
}

TEST_F(PlanDiffTest, AHandEditOfBerthsUnitShowsWhatIsUndoneButNotTheLineage) {
  ASSERT_EQ(Pass("kimi", true).outcome, Outcome::kApplied) << err.str();
  ObservedUnit& u = world.host.Unit("vllm-kimi.service");
  ASSERT_THAT(u.content, HasSubstr("# berth-lineage: "));
  u.content.replace(u.content.find("Restart=on-failure\n"), 19, "Restart=always\nNice=-5\n");
  u.content_hash = Sha256Hex(u.content);
  ASSERT_EQ(Pass("kimi", false).outcome, Outcome::kPlanned) << err.str();
  std::string text = out.str();
  EXPECT_THAT(text, HasSubstr("edited by hand since berth wrote it"));
  EXPECT_THAT(text,
              HasSubstr("\n       -Restart=always\n       -Nice=-5\n       +Restart=on-failure\n"));
  EXPECT_THAT(text, Not(HasSubstr("berth-lineage"))) << "stamped at write: never a change";
}

// A hand edit of berth's own file is untrusted text too: its values reach the one-line detail.
TEST_F(PlanDiffTest, AnEscapeInAHandEditIsEscapedInTheDetailAndTheDiff) {
  ASSERT_EQ(Pass("kimi", true).outcome, Outcome::kApplied) << err.str();
  ObservedUnit& u = world.host.Unit("vllm-kimi.service");
  u.content.replace(u.content.find("Restart=on-failure\n"), 19, "Restart=always\x1b[8m\n");
  u.content_hash = Sha256Hex(u.content);
  ASSERT_EQ(Pass("kimi", false).outcome, Outcome::kPlanned) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("Restart changed: always\\x1b[8m → on-failure"));
  EXPECT_THAT(out.str(), HasSubstr("\n       -Restart=always\\x1b[8m\n"));
  EXPECT_EQ(out.str().find('\x1b'), std::string::npos);
}

TEST_F(PlanDiffTest, AnOrdinaryChangeKeepsItsOneLineDetailUnlessDiffIsAsked) {
  ASSERT_EQ(Pass("kimi", true).outcome, Outcome::kApplied) << err.str();
  ASSERT_EQ(Pass("longer", false).outcome, Outcome::kPlanned) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("ExecStart"));
  EXPECT_THAT(out.str(), Not(HasSubstr("@@")));
  EXPECT_THAT(out.str(), HasSubstr("\nPlan: 1 unit file to write, 1 daemon-reload, 1 service to "
                                   "restart, 1 health gate; port 8000 dark from step 3 until step "
                                   "4.\n"));
  ASSERT_EQ(Pass("longer", false, true).outcome, Outcome::kPlanned) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("       --- a/vllm-kimi.service\n"));
  EXPECT_THAT(out.str(), HasSubstr("\"--max-num-seqs\" \"64\""));
  EXPECT_THAT(out.str(), Not(HasSubstr("berth-lineage")));
  // berth apply --diff: the same plan, the same diff.
  std::string planned = out.str();
  ASSERT_EQ(Pass("longer", true, true).outcome, Outcome::kApplied) << err.str();
  EXPECT_EQ(out.str().rfind(planned.substr(0, planned.find("\nPlan: ")), 0), 0u) << out.str();
}

// The diff is for the reviewer: a saved plan does not carry it (a diff or an old text added to the
// file is a field berth does not write: refused, so the edit fools nobody), and `apply FILE` shows
// the one made from what it observes now.
TEST_F(PlanDiffTest, ASavedAdoptPlanRunsAndShowsTheDiffOfWhatIsOnDiskNow) {
  HandWritten(kHand);
  std::string file = dir / "plan.json";
  ASSERT_EQ(Pass("adopt", false, false, PlanFormat::kText, file).outcome, Outcome::kPlanned);
  std::ifstream in(file);
  nlohmann::json saved = nlohmann::json::parse(in);
  in.close();
  EXPECT_THAT(saved.dump(), Not(HasSubstr("hand-made"))) << "the old text is not saved";
  for (auto& a : saved["actions"])
    if (a["kind"] == "write-unit") {
      a["unit_old_content"] = "[Service]\nExecStart=/bin/innocent\n";
      a["diff"] = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-nothing to see\n+nothing to see\n";
    }
  std::ofstream(file, std::ios::trunc) << saved.dump(2);
  RunReport edited = Pass("", true, false, PlanFormat::kText, "", file);
  EXPECT_EQ(edited.outcome, Outcome::kError) << out.str() << err.str();
  EXPECT_THAT(err.str(), HasSubstr("has the field 'diff', which this berth does not write"));
  EXPECT_FALSE(world.host.Unit("vllm-kimi.service").managed) << "nothing ran";
  ASSERT_EQ(Pass("adopt", false, false, PlanFormat::kText, file).outcome, Outcome::kPlanned);
  RunReport r = Pass("", true, false, PlanFormat::kText, "", file);
  ASSERT_EQ(r.outcome, Outcome::kApplied) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr("-ExecStart=/opt/hand-made/serve --port 8000\n"));
  EXPECT_THAT(out.str(), Not(HasSubstr("innocent")));
  EXPECT_THAT(out.str(), Not(HasSubstr("nothing to see")));
}

TEST_F(PlanDiffTest, ANoOpPlanSaysNoChangesAndHasNoSummaryLine) {
  ASSERT_EQ(Pass("kimi", true).outcome, Outcome::kApplied) << err.str();
  ASSERT_EQ(Pass("kimi", false).outcome, Outcome::kNoChanges) << out.str();
  EXPECT_THAT(out.str(), HasSubstr("No changes: the host matches the manifests."));
  EXPECT_THAT(out.str(), Not(HasSubstr("Plan:")));
}

// The observer keeps the text of a hand-written unit up to 64 KiB and says why it kept none.
TEST(ObserveUnitText, HandWrittenUnitsAreReadBoundedAndOnlyAsUtf8) {
  FakeWorld world(Host());
  TempDir units;
  units.Write("hand.service", kHand);
  units.Write("big.service", "[Service]\n" + std::string(70 * 1024, '#') + "\n");
  units.Write("latin1.service", "[Unit]\nDescription=caf\xe9\n");
  ObservedUnit& vendor = world.host.Unit("vendor.service");
  vendor.load_state = "loaded";
  vendor.fragment_path = "/usr/lib/systemd/system/vendor.service";
  FakeSystemd systemd(&world);
  auto got = ObserveUnits(systemd, UnitFileStore(units.path()),
                          {"hand.service", "big.service", "latin1.service", "vendor.service"});
  ASSERT_TRUE(got.ok()) << got.status().message();
  Observed o;
  o.units = *got;
  EXPECT_EQ(o.FindUnit("hand.service")->content, kHand);
  EXPECT_EQ(o.FindUnit("hand.service")->content_note, "");
  EXPECT_EQ(o.FindUnit("big.service")->content, "");
  EXPECT_EQ(o.FindUnit("big.service")->content_note,
            "the file is larger than 64 KiB (71691 bytes)");
  EXPECT_EQ(o.FindUnit("latin1.service")->content_note, "the file is not UTF-8 text");
  EXPECT_EQ(o.FindUnit("vendor.service")->content_note,
            "the file is /usr/lib/systemd/system/vendor.service, outside berth's unit directory");
}

Action Adopted(const std::string& note) {
  Action a = MakeAction(ActionKind::kWriteUnit);
  a.address = "unit/x.service";
  a.unit = "x.service";
  a.reason = Reason::kUnitAdopted;
  a.detail = "adopt: true replaces /etc/systemd/system/x.service";
  a.As<UnitFileStep>().content = "[Service]\nExecStart=/bin/x\n";
  a.As<UnitFileStep>().old_note = note;
  a.As<UnitFileStep>().replaces = true;
  a.As<UnitFileStep>().adopts = true;
  a.As<UnitFileStep>().loses_edits = true;
  return a;
}

TEST(PlanText, AnAdoptedUnitWhoseTextIsNotKnownSaysSoInsteadOfADiff) {
  Plan p;
  p.host = "gpu-01";
  p.actions = {Adopted("the file is larger than 64 KiB (70000 bytes)")};
  EXPECT_THAT(PlanToText(p, Desired{}),
              HasSubstr("\n       (no diff: the file is larger than 64 KiB (70000 bytes))\n"));
  EXPECT_THAT(
      PlanToJson(p, Desired{}),
      HasSubstr("\"diff\": \"(no diff: the file is larger than 64 KiB (70000 bytes))\\n\""));
}

TEST(PlanText, TheSummaryCountsEveryActionAndSaysWhenThePlanCannotRun) {
  Plan p;
  p.host = "gpu-01";
  auto act = [](ActionKind k, const std::string& address) {
    Action a = MakeAction(k);
    a.address = address;
    return a;
  };
  p.actions = {act(ActionKind::kDownload, "model/a"),    act(ActionKind::kDownload, "model/b"),
               act(ActionKind::kRemoveModel, "model/c"), act(ActionKind::kRemoveUnit, "unit/d"),
               act(ActionKind::kStop, "service/d"),      act(ActionKind::kDisable, "unit/d")};
  p.disk_needed = 1'500'000'000;
  p.disk_known = false;
  Disruption dark;
  dark.port = 8000;
  dark.from_step = 4;  // printed as step 5
  dark.service = "service/d";
  dark.reason = "state: absent";
  p.disruptions = {dark};
  std::string text = PlanToText(p, Desired{});
  EXPECT_THAT(text, HasSubstr("\nPlan: 2 models to download (at least 1.5 GB), 1 to remove, 1 unit "
                              "file to remove, 1 service to stop, 1 unit to disable at boot; port "
                              "8000 dark from step 5 on.\n"));
  p.problems = {{0, "disk", "short by 1 GB", 0, 0}};  // at step 1
  std::string blocked = PlanToText(p, Desired{});
  EXPECT_THAT(blocked, HasSubstr("BLOCKED"));
  // The summary is the text's last line.
  EXPECT_EQ(blocked.substr(blocked.rfind('\n', blocked.size() - 2) + 1, 36),
            "Plan (blocked, nothing runs): 2 mode");
}

// The plan holds every step 0-based; people and the JSON form see them 1-based, with 0 in the
// JSON for "nothing ends it" and "before any step" (docs/plan-json.md).
TEST(PlanText, TheZeroBasedStepsOfTheValueArePrintedOneBased) {
  Plan p;
  p.host = "gpu-01";
  Action stop = MakeAction(ActionKind::kStop);
  stop.address = "service/a";
  Action start = MakeAction(ActionKind::kStart);
  start.address = "service/b";
  p.actions = {stop, start};
  Disruption until;
  until.port = 8000;
  until.from_step = 0;
  until.until_step = 1;
  until.reason = "until";
  Disruption dark;
  dark.port = 8001;
  dark.from_step = 1;
  dark.reason = "dark";
  p.disruptions = {until, dark};
  Problem at;
  at.step = 1;
  at.resource = "disk";
  at.message = "short";
  Problem before;
  before.resource = "manifest";
  before.message = "wrong";
  p.problems = {at, before};
  std::string text = PlanToText(p, Desired{});
  EXPECT_THAT(text, HasSubstr("port 8000 unavailable from step 1 until step 2 is healthy (until)"));
  EXPECT_THAT(text, HasSubstr("port 8001 unavailable from step 2 on"));
  EXPECT_THAT(text, HasSubstr("\n  step 2, disk: short\n  manifest: wrong\n"));
  EXPECT_THAT(text, HasSubstr("port 8000 dark from step 1 until step 2, port 8001 dark from "
                              "step 2 on."));
  nlohmann::json j = nlohmann::json::parse(PlanToJson(p, Desired{}));
  EXPECT_EQ(j["disruption"][0]["from_step"], 1);
  EXPECT_EQ(j["disruption"][0]["until_step"], 2);
  EXPECT_EQ(j["disruption"][1]["from_step"], 2);
  EXPECT_EQ(j["disruption"][1]["until_step"], 0);
  EXPECT_EQ(j["feasibility"]["problems"][0]["step"], 2);
  EXPECT_EQ(j["feasibility"]["problems"][1]["step"], 0);
}

}  // namespace
}  // namespace berth::testing
