// Pinned revisions (berth.lock): an upstream push changes nothing until the pin moves; when it
// moves, the download, the restart and the reason say so, and the revision the service left stays
// for a rollback (host.keep_revisions) while older ones are pruned.
#include "tests/planners/planner_fixture.h"

namespace berth::testing {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class PinsTest : public PlannerTest {
 protected:
  PinsTest() {
    Gpus(1, GiB(141));
    Model("a", "org/a");
    Vllm("svc", "a", {0}, 8000);
  }
  void Pin(const std::string& commit, const std::string& revision = "main") {
    d.locks["a"] = {"org/a", revision, commit, "2026-12-01T06:00:00Z"};
  }
  /// What the Hub says main points at now.
  void Upstream(const std::string& commit, uint64_t bytes = 1000) {
    o.hub.clear();
    Hub("org/a", "main", commit, bytes);
  }
  static std::vector<std::string> NoteTexts(const Plan& p) {
    std::vector<std::string> v;
    for (const auto& n : p.notes) v.push_back(n.address + ": " + n.detail);
    return v;
  }
  static std::vector<std::string> Removed(const Plan& p) {
    std::vector<std::string> v;
    for (const auto& a : p.actions)
      if (a.kind == ActionKind::kRemoveModel) v.push_back(a.As<RemoveModelStep>().commit);
    return v;
  }
};

TEST_F(PinsTest, AnUpstreamPushChangesNothingAndThePlanSaysWhereUpstreamMoved) {
  Pin(Commit("1"));
  Upstream(Commit("1"));
  Converge();
  Upstream(Commit("2"), 1200);
  Plan p = PlanNow();
  EXPECT_THAT(Steps(p), IsEmpty());
  EXPECT_THAT(NoteTexts(p), Contains("model/a: upstream main moved to 2222222 (pinned at "
                                     "1111111); berth lock --update a to move"));
  EXPECT_THAT(p.warnings, IsEmpty());
}

TEST_F(PinsTest, AMovedPinDownloadsRestartsKeepsThePreviousAndPrunesTheOneBefore) {
  Pin(Commit("1"));
  Upstream(Commit("1"));
  Converge();
  // berth lock --update a: the pin moves to 2.
  Upstream(Commit("2"), 1200);
  Pin(Commit("2"));
  Plan p = PlanNow();
  EXPECT_THAT(
      Steps(p),
      ElementsAre("download model/a revision_changed", "write-unit unit/svc.service unit_changed",
                  "daemon-reload systemd unit_files_changed", "restart service/svc model_updated",
                  "wait-healthy service/svc health_gate"));
  EXPECT_EQ(p.actions[0].As<DownloadStep>().commit, Commit("2"));
  EXPECT_THAT(p.actions[0].detail,
              HasSubstr("(main, pinned in berth.lock), 1.2 kB: berth.lock pins main at 2222222 "
                        "(the store has 1111111)"));
  EXPECT_THAT(p.actions[0].detail, Not(HasSubstr("the manifest asks")));
  EXPECT_THAT(NoteTexts(p), Contains(HasSubstr("model/a: org/a@1111111, 1 kB, a previous "
                                               "revision, kept for a rollback "
                                               "(host.keep_revisions: 1)")));
  Converge();
  // The pin moves again: 2 is the revision kept now, 1 is pruned with the true reason.
  Upstream(Commit("3"), 1300);
  Pin(Commit("3"));
  p = PlanNow();
  EXPECT_THAT(Removed(p), ElementsAre(Commit("1")));
  EXPECT_THAT(At(p, "remove-model model/a old_revision").detail,
              HasSubstr("replaced by 3333333; older than the 1 previous revision kept for a "
                        "rollback (host.keep_revisions: 1)"));
  EXPECT_THAT(NoteTexts(p), Contains(HasSubstr("org/a@2222222, 1.2 kB, a previous revision")));
  Converge();
}

TEST_F(PinsTest, KeepRevisionsZeroPrunesTheRevisionTheServiceLeft) {
  d.host.keep_revisions = 0;
  Pin(Commit("1"));
  Upstream(Commit("1"));
  Converge();
  Upstream(Commit("2"));
  Pin(Commit("2"));
  Plan p = PlanNow();
  EXPECT_THAT(Removed(p), ElementsAre(Commit("1")));
  EXPECT_THAT(At(p, "remove-model model/a old_revision").detail,
              HasSubstr("no previous revision is kept (host.keep_revisions: 0)"));
  Converge();
}

TEST_F(PinsTest, KeepRevisionsTwoKeepsTheLastTwo) {
  d.host.keep_revisions = 2;
  for (const char* c : {"1", "2", "3"}) {
    Pin(Commit(c));
    Upstream(Commit(c));
    Converge();
  }
  EXPECT_THAT(Removed(PlanNow()), IsEmpty());
  Pin(Commit("4"));
  Upstream(Commit("4"));
  EXPECT_THAT(Removed(PlanNow()), ElementsAre(Commit("1")));
}

TEST_F(PinsTest, PinnedBehindUpstreamOnAFreshHostDownloadsThePinnedCommitWithItsOwnSize) {
  Pin(Commit("1"));
  Upstream(Commit("2"), 5000);
  Hub("org/a", Commit("1"), Commit("1"), 1000);  // the observer's question about the pin
  Plan p = PlanNow();
  const Action& dl = At(p, "download model/a model_missing");
  EXPECT_EQ(dl.As<DownloadStep>().commit, Commit("1"));
  EXPECT_EQ(dl.As<DownloadStep>().revision,
            "main");  // the executor fetches dl.commit and points refs/main at it
  EXPECT_EQ(dl.requires_.disk_bytes, 1000u);
  EXPECT_THAT(At(p, "write-unit unit/svc.service unit_missing").As<UnitFileStep>().content,
              HasSubstr("snapshots/" + Commit("1")));
  EXPECT_THAT(NoteTexts(p), Contains(HasSubstr("upstream main moved to 2222222")));
}

TEST_F(PinsTest, AModelWithoutALockEntryFollowsTheHubAndWarnsThatItIsNotPinned) {
  Upstream(Commit("1"));
  Plan p = PlanNow();
  EXPECT_EQ(At(p, "download model/a model_missing").As<DownloadStep>().commit, Commit("1"));
  EXPECT_THAT(p.warnings, Contains(HasSubstr("model/a is not pinned: revision 'main' follows the "
                                             "Hub")));
  // A commit in the manifest pins it itself: no warning.
  d.models["a"].revision = Commit("1");
  EXPECT_THAT(PlanNow().warnings, Not(Contains(HasSubstr("not pinned"))));
}

TEST_F(PinsTest, AStaleEntryIsSaidAndThePlanFollowsTheManifest) {
  Pin(Commit("1"), "v1");  // locked when the manifest asked for v1; it asks for main now
  Upstream(Commit("2"));
  Plan p = PlanNow();
  EXPECT_EQ(At(p, "download model/a model_missing").As<DownloadStep>().commit, Commit("2"));
  EXPECT_THAT(p.warnings, Contains(HasSubstr("model/a: berth.lock's entry is stale: it pins "
                                             "org/a@v1 at 1111111 but the manifest asks for "
                                             "org/a@main")));
  EXPECT_THAT(p.warnings, Contains(HasSubstr("berth lock --update a")));
}

TEST_F(PinsTest, AnUnpinnedUpstreamMoveIsCalledThatNotAManifestChange) {
  Upstream(Commit("1"));
  Converge();
  Upstream(Commit("2"));
  Plan p = PlanNow();
  EXPECT_THAT(At(p, "download model/a revision_changed").detail,
              HasSubstr(": upstream main moved to 2222222 (the store's main is 1111111; not "
                        "pinned in berth.lock)"));
}

TEST_F(PinsTest, AManifestThatAsksForAnotherCommitSaysSo) {
  d.models["a"].revision = Commit("1");
  Converge();
  d.models["a"].revision = Commit("2");
  Plan p = PlanNow();
  EXPECT_THAT(At(p, "download model/a revision_changed").detail,
              HasSubstr("the manifest asks for commit 2222222 (the store has 1111111)"));
}

}  // namespace
}  // namespace berth::testing
