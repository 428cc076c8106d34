// berth's records: the state's JSON round trip, the journal, the lock's holder message, the
// manifest's git commit.
#include "engine/state/state.h"
#include "tests/support/fake_clock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace berth {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class StateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("berth-state-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(StateTest, AFreshStateHasNoLineageUntilItsFirstSaveThenKeepsIt) {
  StateDir sd(dir_.string());
  auto s = sd.Load();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->lineage, "");
  EXPECT_EQ(s->serial, 0u);
  s->serial = 3;
  s->units = {"a.service"};
  s->models["org/m"] = {std::string(40, 'a')};
  s->applied["unit/a.service"] = "hash";
  s->manifest_digest = "d";
  s->manifest_git_commit = std::string(40, 'b');
  s->failures["service/a"] = {"2026-11-30T00:00:00Z", "did not become healthy"};
  s->learned["kimi.service"] = {{8000, 8001}, {{0, 75'000'000'000}, {7, 1}}};
  s->start_times_ms["a.service"] = {38'000, 47'000};
  s->stop_times_ms["a.service"] = {120, 30'020};
  GateFigures g;
  g.time = "2026-12-02T15:04:05Z";
  g.unit = "a.service";
  g.source = "floor";
  g.commit = std::string(40, 'c');
  g.settings = "restart-keys:" + std::string(64, 'd');
  g.concurrency = 32;
  g.max_tokens = 256;
  g.prompt_tokens = 128;
  g.goodput_ttft_ms = 500;
  g.seconds = 30.25;
  g.requests = 310;
  g.errors = 2;
  g.output_tps = 1239.5;
  g.ttft_p50_ms = 180.5;
  g.ttft_p99_ms = 420;
  g.tpot_p50_ms = 25.125;
  g.has_goodput = true;
  g.goodput_rps = 9.75;
  s->gate_figures["a.service"] = {g};
  ASSERT_TRUE(sd.Save(*s).ok());
  auto back = sd.Load();
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->lineage.size(), 32u);
  EXPECT_EQ(StateToJson(*back), StateToJson([&] {
              State t = *s;
              t.lineage = back->lineage;
              return t;
            }()));
  EXPECT_EQ(back->ToObserved().models.at("org/m")[0], std::string(40, 'a'));
  EXPECT_EQ(back->ToObserved().learned.at("kimi.service"), s->learned.at("kimi.service"))
      << "what a state-only service held reaches the planner";
  EXPECT_EQ(back->ToObserved().start_times_ms, s->start_times_ms)
      << "the recorded start times reach the planner";
  EXPECT_EQ(back->ToObserved().gate_figures, s->gate_figures)
      << "the recorded gate figures reach the planner, every field";
  ASSERT_TRUE(sd.Save(*back).ok());
  EXPECT_EQ(sd.Load()->lineage, back->lineage) << "the lineage is kept";
}

TEST_F(StateTest, ADamagedStateSaysWhatToDo) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "state.json") << "{not json";
  auto s = StateDir(dir_.string()).Load();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("is damaged"));
  EXPECT_THAT(s.status().message(), HasSubstr("move it aside"));
}

TEST_F(StateTest, ALearnedGpuThatIsNotAnIndexIsDamageNotACrash) {
  for (const char* key : {"x", "99999999999999999999", "-1", "1x"}) {
    auto s = StateFromJson(
        std::string(R"({"format_version": 1, "learned": {"a.service": {"ports": [8000], )") +
            R"("gpu_bytes": {")" + key + R"(": 1}}}})",
        "state.json");
    ASSERT_FALSE(s.ok()) << key;
    EXPECT_THAT(s.status().message(), HasSubstr("is not a GPU index")) << key;
    EXPECT_THAT(s.status().message(), HasSubstr("is damaged")) << key;
  }
}

TEST_F(StateTest, AStartTimeThatIsNotMillisecondsIsDamageNotACrash) {
  for (const char* times : {"[-5]", "[1.5]", "[\"42s\"]", "[null]", "42", "{\"a\": 1}"}) {
    auto s = StateFromJson(
        std::string(R"({"format_version": 1, "start_times_ms": {"a.service": )") + times + "}}",
        "state.json");
    ASSERT_FALSE(s.ok()) << times;
    EXPECT_THAT(s.status().message(), HasSubstr("start_times_ms.a.service")) << times;
    EXPECT_THAT(s.status().message(), HasSubstr("is damaged")) << times;
  }
  auto not_object = StateFromJson(R"({"format_version": 1, "start_times_ms": [1]})", "state.json");
  ASSERT_FALSE(not_object.ok());
  EXPECT_THAT(not_object.status().message(), HasSubstr("is damaged"));
}

TEST_F(StateTest, GateFiguresOfTheWrongShapeAreDamageNotACrash) {
  for (const char* figures :
       {"5", "[5]", "[{}]", "{\"a\": 1}",
        "[{\"time\": \"t\", \"unit\": \"a.service\", \"source\": \"floor\"}]"}) {
    auto s = StateFromJson(
        std::string(R"({"format_version": 1, "gate_figures": {"a.service": )") + figures + "}}",
        "state.json");
    ASSERT_FALSE(s.ok()) << figures;
    EXPECT_THAT(s.status().message(), HasSubstr("gate_figures.a.service")) << figures;
    EXPECT_THAT(s.status().message(), HasSubstr("is damaged")) << figures;
  }
  // At most kGateFiguresKept are kept per unit, the newest.
  std::vector<GateFigures> list;
  for (int i = 0; i < 15; ++i) {
    GateFigures g;
    g.time = std::to_string(i);
    RecordGateFigures(&list, g);
  }
  ASSERT_EQ(list.size(), kGateFiguresKept);
  EXPECT_EQ(list.front().time, "5");
  EXPECT_EQ(list.back().time, "14");
}

TEST_F(StateTest, OnlyTheLastFiveStartsOfAUnitAreKept) {
  State s;
  for (uint64_t ms = 1; ms <= 7; ++ms) s.RecordStartTime("a.service", ms * 1000);
  EXPECT_EQ(s.start_times_ms.at("a.service"),
            (std::vector<uint64_t>{3000, 4000, 5000, 6000, 7000}));
  // A file edited to hold more keeps the newest five too.
  auto read =
      StateFromJson(R"({"format_version": 1, "start_times_ms": {"a.service": [1, 2, 3, 4, 5, 6]}})",
                    "state.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->start_times_ms.at("a.service"), (std::vector<uint64_t>{2, 3, 4, 5, 6}));
}

TEST_F(StateTest, AStartARequestMadeIsRecordedOncePerInvocationAndBerthsOwnNever) {
  State s;
  ObservedUnit u;
  u.name = "chat.service";
  u.invocation_id = std::string(32, 'a');
  u.last_start_ms = 3200;
  EXPECT_TRUE(s.RecordObservedStart(u));
  EXPECT_FALSE(s.RecordObservedStart(u)) << "the same invocation again";
  EXPECT_EQ(s.start_times_ms.at("chat.service"), (std::vector<uint64_t>{3200}));
  EXPECT_EQ(s.start_invocations.at("chat.service"), u.invocation_id);
  // The next request's start is another invocation.
  u.invocation_id = std::string(32, 'b');
  u.last_start_ms = 2900;
  EXPECT_TRUE(s.RecordObservedStart(u));
  EXPECT_EQ(s.start_times_ms.at("chat.service"), (std::vector<uint64_t>{3200, 2900}));
  // A start berth made itself was timed by its executor; one under way has no time; nor does a
  // unit without an invocation.
  u.invocation_id = std::string(32, 'c');
  s.started["chat.service"] = {u.invocation_id, "restart-keys:x"};
  EXPECT_FALSE(s.RecordObservedStart(u));
  u.invocation_id = std::string(32, 'd');
  u.last_start_ms.reset();
  EXPECT_FALSE(s.RecordObservedStart(u));
  u.last_start_ms = 1000;
  u.invocation_id = "";
  EXPECT_FALSE(s.RecordObservedStart(u));
  EXPECT_EQ(s.start_times_ms.at("chat.service"), (std::vector<uint64_t>{3200, 2900}));

  // Saved and read back; the planner sees which invocation was recorded.
  auto back = StateFromJson(StateToJson(s), "state.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->start_invocations, s.start_invocations);
  EXPECT_EQ(back->ToObserved().start_invocations, s.start_invocations);
  // A state written before these were recorded reads as none recorded.
  auto old =
      StateFromJson(R"({"format_version": 1, "start_times_ms": {"a.service": [1]}})", "state.json");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_TRUE(old->start_invocations.empty());
  // Anything but an id is damage, named.
  for (const char* bad : {R"([1])", R"({"a.service": 7})", R"({"a.service": ""})",
                          R"({"a.service": "id with spaces"})"}) {
    auto damaged = StateFromJson(
        std::string(R"({"format_version": 1, "start_invocations": )") + bad + "}", "state.json");
    ASSERT_FALSE(damaged.ok()) << bad;
    EXPECT_THAT(damaged.status().message(), HasSubstr("start_invocations")) << bad;
  }
}

TEST_F(StateTest, OnlyTheLastFiveStopsOfAUnitAreKeptAndDamageIsNamed) {
  State s;
  for (uint64_t ms = 1; ms <= 6; ++ms) s.RecordStopTime("a.service", ms * 1000);
  EXPECT_EQ(s.stop_times_ms.at("a.service"), (std::vector<uint64_t>{2000, 3000, 4000, 5000, 6000}));
  EXPECT_EQ(s.ToObserved().stop_times_ms, s.stop_times_ms);
  auto read = StateFromJson(StateToJson(s), "state.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->stop_times_ms, s.stop_times_ms);
  auto bad =
      StateFromJson(R"({"format_version": 1, "stop_times_ms": {"a.service": [-1]}})", "state.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("stop_times_ms.a.service"));
}

TEST_F(StateTest, TheJournalRoundTripsAndClears) {
  StateDir sd(dir_.string());
  Journal j;
  j.started = "2026-11-30T00:00:00Z";
  j.pid = "42";
  j.entries = {{1, "download", "model/m", "done", ""}, {2, "start", "service/s", "running", ""}};
  ASSERT_TRUE(sd.SaveJournal(j).ok());
  bool exists = false;
  auto back = sd.LoadJournal(&exists);
  ASSERT_TRUE(exists && back.ok());
  EXPECT_EQ(JournalToJson(*back), JournalToJson(j));
  ASSERT_TRUE(sd.ClearJournal().ok());
  sd.LoadJournal(&exists);
  EXPECT_FALSE(exists);
}

// The switches a journal keeps (what each replaced) come back as written, the old unit file byte
// for byte, and a kill during a smoke or floor gate leaves the service unfinished, as one during
// its health gate does.
TEST_F(StateTest, TheJournalKeepsWhatEachSwitchReplacedAndEveryUnfinishedGate) {
  StateDir sd(dir_.string());
  Journal j;
  j.started = "2026-11-30T00:00:00Z";
  j.pid = "42";
  j.entries = {{1, "stop", "service/old", "done", ""},
               {2, "start", "service/new", "done", ""},
               {3, "wait-healthy", "service/new", "done", ""},
               {4, "smoke", "service/new", "running", ""},
               {5, "restart", "service/inplace", "done", ""},
               {6, "wait-healthy", "service/inplace", "done", ""},
               {7, "floor", "service/inplace", "pending", ""},
               {8, "start", "service/ok", "done", ""},
               {9, "wait-healthy", "service/ok", "done", ""}};
  Replaced old;
  old.unit = "old.service";
  old.address = "service/old";
  old.gate.port = 8000;
  old.gate.path = "/health";
  old.gate.served_name = "old";
  old.gate.timeout_ms = 600000;
  old.gate.interval_ms = 5000;
  Action own = MakeAction(ActionKind::kWaitHealthy);
  own.unit = "inplace.service";
  own.address = "service/inplace";
  own.As<HealthStep>().port = 8001;
  own.As<HealthStep>().path = "/health";
  own.As<HealthStep>().timeout_ms = 300000;
  // Behind the front of port 8000, which served svc-old before the switch.
  j.switches = {
      {"service/new", "new.service", {old}, std::nullopt, {}, 8000, "/f/8000.sock", "svc-old"},
      {"service/inplace",
       "inplace.service",
       {},
       "[Unit]\nDescription=\xff\xfe not UTF-8\n",
       own.As<HealthStep>(),
       0,
       "",
       ""}};
  ASSERT_TRUE(sd.SaveJournal(j).ok());
  bool exists = false;
  auto back = sd.LoadJournal(&exists);
  ASSERT_TRUE(exists && back.ok()) << back.status().message();
  EXPECT_EQ(JournalToJson(*back), JournalToJson(j));
  ASSERT_EQ(back->switches.size(), 2u);
  ASSERT_EQ(back->switches[0].replaced.size(), 1u);
  const Replaced& s = back->switches[0].replaced[0];
  EXPECT_EQ(s.unit, "old.service");
  EXPECT_EQ(s.gate.port, 8000);
  EXPECT_EQ(s.gate.served_name, "old");
  EXPECT_EQ(s.gate.timeout_ms, 600000u);
  EXPECT_EQ(back->switches[0].gate.port, 0) << "none kept: not waited for";
  EXPECT_EQ(back->switches[1].gate.port, 8001);
  EXPECT_EQ(back->switches[1].gate.path, "/health");
  EXPECT_FALSE(back->switches[0].unit_before);
  EXPECT_EQ(back->switches[1].unit_before, "[Unit]\nDescription=\xff\xfe not UTF-8\n");
  EXPECT_EQ(back->switches[0].front_port, 8000);
  EXPECT_EQ(back->switches[0].front_socket, "/f/8000.sock");
  EXPECT_EQ(back->switches[0].undo_route, "svc-old") << "where its undo routes the front back to";
  EXPECT_EQ(back->switches[1].front_port, 0);

  BerthState b;
  NoteUnfinishedApply(*back, &b);
  EXPECT_EQ(b.ungated, (std::vector<std::string>{"service/new", "service/inplace"}));
  EXPECT_THAT(b.interrupted, HasSubstr("stopped at step 9"));
}

// A journal written before switches kept their own gate (its stops named for_service, no "gate")
// still reads: what each switch replaced comes back with its gate, and the switch's own gate is
// unknown (port 0: the undo does not wait for it).
TEST(JournalFormat, AJournalFromBeforeSwitchGatesStillReads) {
  auto j = JournalFromJson(R"({"started": "2026-12-01T01:00:00Z", "pid": "77",
      "manifest_digest": "d", "finished": false,
      "actions": [{"step": 1, "kind": "stop", "address": "service/old", "status": "done",
                   "message": ""}],
      "switches": [{"address": "service/new", "unit": "new.service",
                    "stopped": [{"unit": "old.service", "address": "service/old",
                                 "for_service": "new", "host": "", "port": 8000,
                                 "health_path": "/health", "served_name": "old",
                                 "timeout_ms": 600000, "interval_ms": 5000}]}]})",
                           "journal.json");
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(j->entries[0].status, "done");
  ASSERT_EQ(j->switches.size(), 1u);
  ASSERT_EQ(j->switches[0].replaced.size(), 1u);
  EXPECT_EQ(j->switches[0].replaced[0].gate.port, 8000);
  EXPECT_EQ(j->switches[0].replaced[0].gate.path, "/health");
  EXPECT_EQ(j->switches[0].gate.port, 0);
}

TEST_F(StateTest, ASecondLockIsToldWhoHoldsTheFirst) {
  testing::FakeClock clock;
  auto first =
      StateLock::Acquire(dir_.string(), std::chrono::milliseconds(0), "berth apply", clock);
  ASSERT_TRUE(first.ok()) << first.status().message();
  // flock locks belong to the open file: a second open in this process conflicts too. It looks
  // every 100 ms of the clock until its timeout.
  auto second =
      StateLock::Acquire(dir_.string(), std::chrono::milliseconds(300), "berth apply", clock);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("pid " + std::to_string(::getpid())));
  EXPECT_THAT(second.status().message(), HasSubstr("--lock-timeout"));
  EXPECT_EQ(clock.Elapsed(), std::chrono::milliseconds(300));
  first->reset();
  EXPECT_TRUE(StateLock::Acquire(dir_.string(), std::chrono::milliseconds(0), "x", clock).ok());
}

TEST_F(StateTest, TheManifestsGitCommitIsFound) {
  fs::create_directories(dir_ / "repo" / "manifests");
  std::string repo = (dir_ / "repo").string();
  std::ofstream(dir_ / "repo" / "manifests" / "berth.yaml") << "berth: 1\n";
  std::string git = "git -C " + repo + " -c user.name=t -c user.email=t@t ";
  ASSERT_EQ(std::system((git + "init -q && " + git + "add -A && " + git + "commit -qm m").c_str()),
            0);
  std::string head;
  {
    FILE* p = ::popen(("git -C " + repo + " rev-parse HEAD").c_str(), "r");
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, p)) head = buf;
    ::pclose(p);
  }
  head = head.substr(0, 40);
  EXPECT_EQ(GitCommitOf((dir_ / "repo" / "manifests" / "berth.yaml").string()), head);
  EXPECT_EQ(GitCommitOf((dir_ / "repo" / "manifests").string()), head);
  EXPECT_EQ(GitCommitOf(fs::temp_directory_path().string() + "/no-such-dir-berth/x.yaml"), "");
}

TEST_F(StateTest, AGitWorktreesCommitIsFoundThroughItsDotGitFile) {
  fs::create_directories(dir_ / "repo" / "manifests");
  std::string repo = (dir_ / "repo").string();
  std::string wt = (dir_ / "wt").string();
  std::ofstream(dir_ / "repo" / "manifests" / "berth.yaml") << "berth: 1\n";
  std::string git = "git -C " + repo + " -c user.name=t -c user.email=t@t ";
  std::string in_wt = "git -C " + wt + " -c user.name=t -c user.email=t@t ";
  ASSERT_EQ(std::system((git + "init -q && " + git + "add -A && " + git + "commit -qm m && " + git +
                         "worktree add -q -b other " + wt + " && " + in_wt +
                         "commit -q --allow-empty -m second")
                            .c_str()),
            0);
  auto head_of = [](const std::string& dir) {
    std::string head;
    FILE* p = ::popen(("git -C " + dir + " rev-parse HEAD").c_str(), "r");
    char buf[64] = {};
    if (std::fgets(buf, sizeof buf, p)) head = buf;
    ::pclose(p);
    return head.substr(0, 40);
  };
  ASSERT_TRUE(fs::is_regular_file(dir_ / "wt" / ".git")) << "a worktree's .git is a file";
  std::string wt_head = head_of(wt);
  ASSERT_NE(wt_head, head_of(repo));
  EXPECT_EQ(GitCommitOf(wt + "/manifests/berth.yaml"), wt_head);
  // Packed by git gc: the branch is in the main repository's packed-refs.
  ASSERT_EQ(std::system((git + "pack-refs --all").c_str()), 0);
  EXPECT_EQ(GitCommitOf(wt + "/manifests"), wt_head);
}

TEST(Timestamps, AreTheClocksWallTimeInRfc3339) {
  testing::FakeClock clock;  // unix 1'700'000'000
  EXPECT_EQ(NowRfc3339(clock), "2023-11-14T22:13:20Z");
  clock.Advance(std::chrono::milliseconds(90'500));
  EXPECT_EQ(NowRfc3339(clock), "2023-11-14T22:14:50Z");
  EXPECT_EQ(Rfc3339(0), "1970-01-01T00:00:00Z");
}

}  // namespace
}  // namespace berth
