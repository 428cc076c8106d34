// Prewarm (planners/prewarm.h): a switch that takes its service down first reads the new
// weights into the page cache before the first step that goes dark, when they fit in host
// memory (MemAvailable less a margin, less what the plan's earlier prewarms read); otherwise
// the plan says why not. A switch that takes nothing down prewarms nothing.
#include "core/gguf_header.h"
#include "planners/prewarm.h"
#include "tests/planners/scenario_fixture.h"
#include "tests/support/gguf_writer.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kGB = 1'000'000'000;

class PrewarmTest : public ScenarioTest {
 protected:
  /// svc serves model "a" on GPU 0 (the whole GPU); model "b" (`weights` of safetensors,
  /// complete in the store) is what the manifest switches it to: a restart in place.
  void SwitchToB(uint64_t weights, const std::string& service = "svc", int gpu = 0,
                 int port = 8000) {
    if (o.gpus.empty()) OneModel(2);
    Vllm(service, "a", {gpu}, port);
    Converge();
    Model("b", "org/b").revision = Commit("b");
    InStore("org/b", Commit("b"), weights + 1000).weights_bytes = weights;
    d.services[service].model = "b";
  }
  /// Services one (GPU 0, port 8000) and two (GPU 1, port 8001) serving model "a".
  void TwoServicesOnA() {
    OneModel(2);
    Vllm("one", "a", {0}, 8000);
    Vllm("two", "a", {1}, 8001);
    Converge();
  }
  static std::vector<const Note*> NotesOf(const Plan& p, const std::string& address) {
    std::vector<const Note*> out;
    for (const Note& n : p.notes)
      if (n.address == address) {
        EXPECT_EQ(n.verb, "no prewarm");
        out.push_back(&n);
      }
    return out;
  }
  static size_t IndexOf(const Plan& p, ActionKind kind, const std::string& address) {
    for (size_t i = 0; i < p.actions.size(); ++i)
      if (p.actions[i].kind == kind && p.actions[i].address == address) return i;
    ADD_FAILURE() << "no " << ActionKindName(kind) << " " << address;
    return p.actions.size();
  }
};

TEST_F(PrewarmTest, TheNewWeightsAreReadBeforeTheRestartWhenTheyFitInMemory) {
  SwitchToB(100 * kGB);
  Memory(1000 * kGB, 600 * kGB);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  size_t prewarm = IndexOf(p, ActionKind::kPrewarm, "model/b");
  size_t restart = IndexOf(p, ActionKind::kRestart, "service/svc");
  ASSERT_LT(prewarm, restart);
  const Action& a = p.actions[prewarm];
  EXPECT_EQ(a.reason, Reason::kPrewarm);
  EXPECT_EQ(a.unit, "svc.service");
  EXPECT_FALSE(a.takes_down);
  EXPECT_EQ(a.As<PrewarmStep>().snapshot, SnapshotPath("/models", "org/b", Commit("b")));
  EXPECT_EQ(a.As<PrewarmStep>().bytes, 100 * kGB);
  EXPECT_THAT(a.detail, HasSubstr("100 GB of safetensors weights service/svc starts on"));
  EXPECT_THAT(a.detail, HasSubstr("memory available 600 GB, margin 100 GB"));
  // Every step is before the switch's; the switch names its own steps still.
  ASSERT_EQ(p.switches.size(), 1u);
  const Switch& sw = p.switches[0];
  EXPECT_EQ(sw.start, restart);
  EXPECT_EQ(p.actions[sw.gates.at(0)].kind, ActionKind::kWaitHealthy);
  for (size_t i : sw.steps) EXPECT_NE(i, prewarm);
  EXPECT_TRUE(p.actions[restart].takes_down);
  EXPECT_TRUE(NotesOf(p, "service/svc").empty());
  Converge();
}

// llama-server maps its GGUF file: read into the page cache before the switch, its start maps
// pages from memory instead of the disk (docs/engines.md: cold vs prewarmed start).
TEST_F(PrewarmTest, ALlamaServersGgufFileIsReadBeforeItsRestart) {
  OneModel(1);
  ServiceSpec& s = Service("ll", EngineKind::kLlamaServer, "a", {0}, 8080);
  s.llama.model_file = "m.gguf";
  s.gpu_memory = GiB(20);
  Converge();
  Memory(1000 * kGB, 600 * kGB);
  Model("b", "org/b").revision = Commit("b");
  GgufHeader h{3, "llama", "", {}};
  h.model = ParseGgufModel(LlamaShaped(256, 4, 512, 4, 2, 32000, 2048, GgufWriter::kF32).Bytes());
  InStore("org/b", Commit("b"), 80'000'000).gguf = std::map<std::string, GgufHeader>{{"m.gguf", h}};
  d.services["ll"].model = "b";
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  size_t prewarm = IndexOf(p, ActionKind::kPrewarm, "model/b");
  ASSERT_LT(prewarm, IndexOf(p, ActionKind::kRestart, "service/ll"));
  const PrewarmStep& step = p.actions[prewarm].As<PrewarmStep>();
  EXPECT_EQ(step.snapshot, SnapshotPath("/models", "org/b", Commit("b")));
  EXPECT_EQ(step.file, "m.gguf");
  EXPECT_EQ(step.bytes, h.model->TensorBytes());
  EXPECT_THAT(p.actions[prewarm].detail,
              HasSubstr("read the 75 MB of GGUF file m.gguf service/ll starts on into the "
                        "page cache before its switch goes dark"));
  // Without the file's figures berth does not know how much to read, and says so.
  o.store.repos.back().revisions.back().gguf->at("m.gguf").model.reset();
  Plan unread = PlanNow();
  ASSERT_EQ(NotesOf(unread, "service/ll").size(), 1u);
  EXPECT_THAT(NotesOf(unread, "service/ll")[0]->detail,
              HasSubstr("berth has not read the size of the GGUF file m.gguf of model/b"));
}

TEST_F(PrewarmTest, WeightsThatDoNotFitAreNotReadAndThePlanSaysWhy) {
  SwitchToB(100 * kGB);
  Memory(400 * kGB, 120 * kGB);  // margin 40 GB: 80 GB of room for 100 GB
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  for (const Action& a : p.actions) EXPECT_NE(a.kind, ActionKind::kPrewarm);
  auto notes = NotesOf(p, "service/svc");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0]->detail,
            "its 100 GB of weights to read do not fit in the 120 GB of memory "
            "available, less a margin of 40 GB; its start reads them from disk while the port "
            "is dark");
}

TEST_F(PrewarmTest, WeightsTheCacheHoldsAlreadyAreNotReadAgain) {
  SwitchToB(100 * kGB);
  Memory(1000 * kGB, 600 * kGB);
  for (auto& r : o.store.repos)
    if (r.repo_id == "org/b") r.revisions[0].resident_bytes = 99 * kGB;
  Plan p = PlanNow();
  for (const Action& a : p.actions) EXPECT_NE(a.kind, ActionKind::kPrewarm);
  auto notes = NotesOf(p, "service/svc");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0]->detail, "the page cache holds 99 GB of its 100 GB of weights already");
}

TEST_F(PrewarmTest, WhatTheCacheHoldsIsNotReadAndNotCounted) {
  SwitchToB(100 * kGB);
  Memory(400 * kGB, 120 * kGB);  // 80 GB of room
  for (auto& r : o.store.repos)
    if (r.repo_id == "org/b") r.revisions[0].resident_bytes = 30 * kGB;
  Plan p = PlanNow();
  const Action& a = p.actions[IndexOf(p, ActionKind::kPrewarm, "model/b")];
  EXPECT_EQ(a.As<PrewarmStep>().bytes, 70 * kGB);
  EXPECT_THAT(a.detail, HasSubstr("30 GB already cached"));
}

TEST_F(PrewarmTest, WithoutAMemoryObservationThePlanSaysItCannotTell) {
  SwitchToB(100 * kGB);
  o.memory.error = "/proc/meminfo: no MemAvailable line";
  Plan p = PlanNow();
  for (const Action& a : p.actions) EXPECT_NE(a.kind, ActionKind::kPrewarm);
  auto notes = NotesOf(p, "service/svc");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0]->detail, HasSubstr("host memory was not observed (/proc/meminfo: no "
                                          "MemAvailable line)"));
}

TEST_F(PrewarmTest, ThePlansPrewarmsShareTheMemory) {
  TwoServicesOnA();
  for (const char* m : {"b", "c"}) StoredModel(m, 100 * kGB);
  d.services["one"].model = "b";
  d.services["two"].model = "c";
  // 220 GB available, margin 40 GB: the first takes 100 of the 180 GB of room, the second
  // does not fit in the 80 left.
  Memory(400 * kGB, 220 * kGB);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  size_t prewarms = 0;
  for (const Action& a : p.actions) prewarms += a.kind == ActionKind::kPrewarm;
  EXPECT_EQ(prewarms, 1u);
  EXPECT_EQ(p.actions[IndexOf(p, ActionKind::kPrewarm, "model/b")].unit, "one.service");
  auto notes = NotesOf(p, "service/two");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0]->detail, HasSubstr("(100 GB of it taken by earlier prewarms and sleeps)"));
}

TEST_F(PrewarmTest, TwoSwitchesToOneModelReadItOnce) {
  TwoServicesOnA();
  StoredModel("b", 100 * kGB);
  d.services["one"].model = "b";
  d.services["two"].model = "b";
  Memory(1000 * kGB, 600 * kGB);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  size_t prewarms = 0;
  for (const Action& a : p.actions) prewarms += a.kind == ActionKind::kPrewarm;
  EXPECT_EQ(prewarms, 1u);
  size_t at = IndexOf(p, ActionKind::kPrewarm, "model/b");
  auto notes = NotesOf(p, "service/two");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0]->detail,
            "step " + std::to_string(at + 1) + " reads the same weights into the page cache");
}

TEST_F(PrewarmTest, ASwitchThatTakesNothingDownPrewarmsNothing) {
  OneModel(2);
  Vllm("svc", "a", {0}, 8000);
  Converge();
  Model("b", "org/b").revision = Commit("b");
  InStore("org/b", Commit("b"), 100 * kGB).weights_bytes = 100 * kGB;
  Vllm("other", "b", {1}, 8001);  // a new service on a free GPU and port
  Memory(1000 * kGB, 600 * kGB);
  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  for (const Action& a : p.actions) EXPECT_NE(a.kind, ActionKind::kPrewarm);
  EXPECT_TRUE(NotesOf(p, "service/other").empty());
}

TEST_F(PrewarmTest, HostPrewarmFalseReadsNothingAndSaysSo) {
  SwitchToB(100 * kGB);
  Memory(1000 * kGB, 600 * kGB);
  d.host.prewarm = false;
  Plan p = PlanNow();
  for (const Action& a : p.actions) EXPECT_NE(a.kind, ActionKind::kPrewarm);
  auto notes = NotesOf(p, "service/svc");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_THAT(notes[0]->detail, HasSubstr("host.prewarm is false"));
}

TEST(PrewarmMargin, IsATenthOfMemoryAndAtLeastTwoGiB) {
  EXPECT_EQ(PrewarmMargin(1000 * kGB), 100 * kGB);
  EXPECT_EQ(PrewarmMargin(8 * kGB), uint64_t{2} << 30);
}

}  // namespace
}  // namespace berth::testing
