// history.json: every apply that ran actions leaves one entry (when, which manifest, what, how it
// ended), bounded, validated on read; `berth history` prints them newest first.
#include "engine/state/history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "engine/apply/reconciler.h"
#include "engine/cli/commands.h"
#include "tests/engine/reconciler_fixture.h"
#include "tests/providers/temp_dir.h"
#include "tests/support/fake_world.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class HistoryTest : public ::testing::Test {
 protected:
  HistoryTest() : world(EmptyHost()) {
    dir.Write(
        "m/berth.yaml",
        "berth: 1\nhost: {store: /models}\nmodels:\n  chat: {source: hf://org/chat, revision: " +
            Commit("c") +
            ", size: 1GB}\nservices:\n  chat: {model: chat, engine: vllm, gpus: [0], port: "
            "8000, health: {timeout: 1m}}\n");
  }
  RunReport Apply(bool retry = false) {
    std::ostringstream out, err;
    Reporter say(out, err, PlanFormat::kText);
    ReconcileOptions o;
    o.manifest_path = dir / "m/berth.yaml";
    o.state_dir = dir / "state";
    o.apply = true;
    o.yes = true;
    o.retry = retry;
    return Reconciler(world.Deps(&say)).Run(o);
  }
  TempDir dir;
  FakeWorld world;
};

TEST_F(HistoryTest, EveryApplyThatRanActionsIsRecordedNewestLast) {
  world.never_healthy.insert("chat.service");
  ASSERT_EQ(Apply().outcome, Outcome::kFailed);
  world.never_healthy.clear();
  ASSERT_EQ(Apply().outcome, Outcome::kHeld);  // refused before anything ran: not an apply
  ASSERT_EQ(Apply(/*retry=*/true).outcome, Outcome::kApplied);
  ASSERT_EQ(Apply().outcome, Outcome::kNoChanges);  // nothing ran: nothing recorded

  Result<std::vector<HistoryEntry>> h = ReadHistory(dir / "state");
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0].outcome, "failed");
  EXPECT_THAT((*h)[0].message, HasSubstr("chat.service did not become healthy within 1m"));
  EXPECT_EQ((*h)[1].outcome, "applied");
  EXPECT_THAT((*h)[0].actions, ::testing::Contains("start service/chat"));
  EXPECT_THAT((*h)[1].actions, ::testing::Contains("wait-healthy service/chat"));
  EXPECT_EQ((*h)[1].steps_done, static_cast<int>((*h)[1].actions.size()));
  EXPECT_FALSE((*h)[1].manifest_digest.empty());

  std::ostringstream out, err;
  EXPECT_EQ(RunHistory(dir / "state", "text", 20, out, err), kExitOk) << err.str();
  // Newest first.
  EXPECT_LT(out.str().find("applied in"), out.str().find("failed in")) << out.str();
  out.str("");
  EXPECT_EQ(RunHistory(dir / "state", "json", 1, out, err), kExitOk);
  Result<std::vector<HistoryEntry>> last = HistoryFromJson(out.str(), "stdout");
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].outcome, "applied");
}

TEST(History, ADamagedFileIsAnErrorNamingItNeverACrash) {
  for (const char* text : {"", "[]", "{\"format_version\": 2}", "{\"format_version\": 1}",
                           "{\"format_version\": 1, \"applies\": [{\"duration_ms\": -1}]}",
                           "{\"format_version\": 1, \"applies\": [{\"actions\": [1]}]}",
                           "{\"format_version\": 1, \"applies\": [7]}"}) {
    Result<std::vector<HistoryEntry>> h = HistoryFromJson(text, "/var/lib/berth/history.json");
    ASSERT_FALSE(h.ok()) << text;
    EXPECT_THAT(h.status().message(), HasSubstr("/var/lib/berth/history.json is damaged"));
  }
}

// A failure's message quotes servers and commands: history.json is still JSON when it holds a
// byte that is not UTF-8, and `berth history` shows terminal controls, CR, LF and C1 bytes as
// \xNN instead of obeying them.
TEST(History, ForeignBytesAreKeptAsJsonAndShownEscaped) {
  TempDir dir;
  HistoryEntry e;
  e.started = "2026-12-01T10:00:00Z";
  e.outcome = "failed";
  e.actions = {"smoke service/chat\x1b[2J"};
  e.message =
      "the smoke gate failed: 'bad \xff\x1b]0;owned\x07\r\x9b"
      "31m'\n  next line";
  ASSERT_TRUE(AppendHistory(dir.path(), e).ok());
  Result<std::vector<HistoryEntry>> h = ReadHistory(dir.path());
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ((*h)[0].message,
            "the smoke gate failed: 'bad \\xff\x1b]0;owned\x07\r\\x9b31m'\n  next line");

  std::ostringstream out, err;
  ASSERT_EQ(RunHistory(dir.path(), "text", 20, out, err), kExitOk) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("1. smoke service/chat\\x1b[2J\n"));
  EXPECT_THAT(out.str(), HasSubstr("'bad \\xff\\x1b]0;owned\\x07\\x0d\\x9b31m'\n  next line"));
  EXPECT_EQ(out.str().find_first_of("\x1b\r\x07\x9b\xff"), std::string::npos) << out.str();
  out.str("");
  ASSERT_EQ(RunHistory(dir.path(), "json", 20, out, err), kExitOk) << err.str();
  EXPECT_TRUE(HistoryFromJson(out.str(), "stdout").ok());
}

TEST(History, OnlyTheLastEntriesAreKept) {
  TempDir dir;
  for (size_t i = 0; i < kHistoryKept + 5; ++i) {
    HistoryEntry e;
    e.started = std::to_string(i);
    ASSERT_TRUE(AppendHistory(dir.path(), e).ok());
  }
  Result<std::vector<HistoryEntry>> h = ReadHistory(dir.path());
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->size(), kHistoryKept);
  EXPECT_EQ(h->front().started, "5");
  EXPECT_EQ(h->back().started, std::to_string(kHistoryKept + 4));
}

}  // namespace
}  // namespace berth::testing
