// berth status as a value: what runs (state, model and the commit its unit names, since when,
// health, last start and bench figures) and what the store holds, from an observation.
#include "engine/output/status_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "manifests/loader.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

const std::string kCommit = "b968826d9c46dd6066d109eabc6255188de91218";
const std::string kOld = "0123456789abcdef0123456789abcdef01234567";

Desired Manifest() {
  LoadResult r = LoadManifestTexts(
      {{"m.yaml",
        "berth: 1\nmodels:\n  qwen: {source: hf://Qwen/Qwen3-8B}\nservices:\n"
        "  chat: {model: qwen, engine: vllm, gpus: [0], port: 8001}\n"
        "  old: {model: qwen, engine: vllm, gpus: [0], port: 8002, state: stopped}\n"}});
  EXPECT_TRUE(r.ok());
  return r.desired;
}

Observed Host() {
  Observed o;
  o.hostname = "gpu-01";
  ObservedUnit u;
  u.name = "chat.service";
  u.load_state = "loaded";
  u.active_state = "active";
  u.sub_state = "running";
  u.unit_file_state = "enabled";
  u.content = "ExecStart=\"vllm\" \"serve\" \"/m/models--Qwen--Qwen3-8B/snapshots/" + kCommit +
              "\" \"--port\" \"8001\"\n";
  u.active_enter_usec = 1'764'000'000'000'000;  // 2025-11-24T16:00:00Z
  o.units.push_back(u);
  ObservedRepo repo;
  repo.repo_id = "Qwen/Qwen3-8B";
  ObservedRevision now;
  now.commit = kCommit;
  now.refs = {"main"};
  now.complete = true;
  now.bytes_present = 16'400'000'000;
  ObservedRevision before;
  before.commit = kOld;
  before.complete = true;
  before.bytes_present = 16'300'000'000;
  repo.revisions = {now, before};
  o.store.repos.push_back(repo);
  o.state.start_times_ms["chat.service"] = {40000, 42000};
  return o;
}

TEST(StatusView, ServicesAndModelsAsTheHostRunsThem) {
  BenchRecord b;
  b.time = "2026-12-01T10:00:00Z";
  b.service = "chat";
  b.levels.resize(2);
  b.levels[1].concurrency = 32;
  b.levels[1].output_tps = 1264;
  b.levels[1].ttft_p50_ms = 42.5;
  StatusView v = MakeStatus(Manifest(), Host(), {{"chat", "healthy"}}, {b});
  std::string text = StatusText(v, 1'764'003'600.0);  // an hour later
  EXPECT_THAT(text,
              HasSubstr("chat (chat.service): active/running, wanted running, enabled at boot"));
  EXPECT_THAT(text, HasSubstr("model qwen: Qwen/Qwen3-8B@b968826"));
  EXPECT_THAT(text, HasSubstr("since 2025-11-24T16:00:00Z (1h)"));
  EXPECT_THAT(text, HasSubstr("port 8001: healthy"));
  EXPECT_THAT(text, HasSubstr("last start: healthy 42s after it began"));
  EXPECT_THAT(text, HasSubstr("1264 output tok/s at concurrency 32"));
  EXPECT_THAT(text, HasSubstr("old (old.service): not-found, wanted stopped"));
  EXPECT_THAT(text, HasSubstr("qwen: Qwen/Qwen3-8B main; used by chat"));
  EXPECT_THAT(text, HasSubstr("b968826  16.4 GB  complete  (main)"));
  EXPECT_THAT(text, HasSubstr("0123456  16.3 GB  complete"));

  nlohmann::json j = nlohmann::json::parse(StatusJson(v));
  EXPECT_EQ(j["services"][0]["commit"], kCommit);
  EXPECT_EQ(j["services"][0]["last_start_ms"], 42000);
  EXPECT_EQ(j["services"][1]["last_bench"], nullptr);
  EXPECT_EQ(j["models"][0]["revisions"].size(), 2u);
}

// A standby that sleeps says so, in the text and the JSON; an awake one does not.
TEST(StatusView, ASleepingStandbySaysItSleeps) {
  Observed o = Host();
  ObservedUnit old = o.units[0];
  old.name = "old.service";
  o.units.push_back(old);
  o.sleeping["old.service"] = true;
  o.sleeping["chat.service"] = false;
  StatusView v = MakeStatus(Manifest(), o, {}, {});
  std::string text = StatusText(v, 1'764'003'600.0);
  EXPECT_THAT(text, HasSubstr("old (old.service): active/running, asleep (standby: its GPU memory "
                              "freed, woken on a switch back), wanted stopped"));
  EXPECT_THAT(text, HasSubstr("chat (chat.service): active/running, wanted running"));
  nlohmann::json j = nlohmann::json::parse(StatusJson(v));
  EXPECT_EQ(j["services"][0]["asleep"], false);
  EXPECT_EQ(j["services"][1]["asleep"], true);
}

TEST(StatusView, AnOnDemandServersLastStartIsTheOneARequestMadeWhenBerthHasNotRecordedIt) {
  LoadResult r = LoadManifestTexts(
      {{"m.yaml",
        "berth: 1\nmodels:\n  qwen: {source: hf://Qwen/Qwen3-8B}\nservices:\n"
        "  chat: {model: qwen, engine: vllm, gpus: [0], port: 8001, on_demand: true, "
        "server_port: 18001}\n"}});
  ASSERT_TRUE(r.ok());
  Observed o = Host();
  ObservedUnit& server = o.units[0];
  server.active_state = "inactive";  // woken by a request, idle again
  server.invocation_id = std::string(32, 'e');
  server.last_start_ms = 3200;
  std::string text = StatusText(MakeStatus(r.desired, o, {}, {}), 1'764'003'600.0);
  EXPECT_THAT(text, HasSubstr("last start: healthy 3200ms after it began"));
  // Recorded since: the record says the same.
  o.state.start_times_ms["chat.service"].push_back(3200);
  o.state.start_invocations["chat.service"] = server.invocation_id;
  server.last_start_ms = 9999;  // not read again for a recorded invocation
  text = StatusText(MakeStatus(r.desired, o, {}, {}), 1'764'003'600.0);
  EXPECT_THAT(text, HasSubstr("last start: healthy 3200ms after it began"));
}

TEST(StatusView, TheCommitIsReadOnlyFromASnapshotPathThatHoldsOne) {
  EXPECT_EQ(CommitInUnit("x /snapshots/" + kCommit + "\""), kCommit);
  EXPECT_EQ(CommitInUnit("x /snapshots/main\" /snapshots/" + kOld), kOld);
  EXPECT_EQ(CommitInUnit("/snapshots/0123"), "");
  EXPECT_EQ(CommitInUnit(""), "");
}

}  // namespace
}  // namespace berth
