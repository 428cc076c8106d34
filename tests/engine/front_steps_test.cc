// The executor's front steps (engine/apply/front_steps.h) against a fake front: which call each
// step makes, that a drain running out is not a failure while a front that cannot be asked is,
// that the ready step waits its lead, and that a configuration is written (its folder with its
// parents) and reloaded only when the plan says the front runs.
#include "engine/apply/front_steps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/front.h"
#include "planners/front_render.h"
#include "tests/support/fake_clock.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct FakeFront : FrontControl {
  std::vector<std::string> calls;
  std::vector<int64_t> sessions;  // answered in turn; the last one repeats
  Status fail;                    // returned by every call when not ok
  Status Route(const std::string& s) override { return Note("route " + s); }
  Status Hold() override { return Note("hold"); }
  Status Drain(const std::string& s) override { return Note("drain " + s); }
  Result<int64_t> Sessions(const std::string& s) override {
    calls.push_back("sessions " + s);
    if (!fail.ok()) return fail;
    int64_t n = sessions.empty() ? 0 : sessions.front();
    if (sessions.size() > 1) sessions.erase(sessions.begin());
    return n;
  }
  Status SetReady(bool r) override { return Note(r ? "ready 200" : "ready 503"); }
  Result<FrontStats> Stats() override { return FrontStats{}; }
  Status Note(const std::string& c) {
    calls.push_back(c);
    return fail;
  }
};

class FrontStepsTest : public ::testing::Test {
 protected:
  FrontSteps Steps() {
    return FrontSteps(
        [this](const std::string&, const std::string&) { return std::make_unique<Proxy>(&front); },
        [this](const std::string& m, const std::string& a, Clock&) {
          reloads.push_back(m + " " + a);
          return Status::Ok();
        },
        &clock, [this](const std::string& line) { progress << line << "\n"; });
  }
  // FrontSteps owns what the connector returns: a proxy onto the test's fake.
  struct Proxy : FrontControl {
    explicit Proxy(FakeFront* fake) : f(fake) {}
    FakeFront* f;
    Status Route(const std::string& s) override { return f->Route(s); }
    Status Hold() override { return f->Hold(); }
    Status Drain(const std::string& s) override { return f->Drain(s); }
    Result<int64_t> Sessions(const std::string& s) override { return f->Sessions(s); }
    Status SetReady(bool r) override { return f->SetReady(r); }
    Result<FrontStats> Stats() override { return f->Stats(); }
  };
  static Action Front(ActionKind kind, const std::string& server = "") {
    Action a = MakeAction(kind);
    a.address = "front/8000";
    a.As<FrontStep>().port = 8000;
    a.As<FrontStep>().server = server;
    a.As<FrontStep>().socket = "/run/f/8000.sock";
    a.As<FrontStep>().master = "/run/f/8000.master";
    return a;
  }
  // A front step as the executor runs it: its kind's runner on its payload.
  Status Run(const Action& a) { return Steps().Run(a.kind, a.As<FrontStep>()); }
  FakeFront front;
  FakeClock clock;
  std::ostringstream progress;
  std::vector<std::string> reloads;
};

TEST_F(FrontStepsTest, ARouteToHoldHoldsAndARouteToAServiceRoutesThere) {
  ASSERT_TRUE(Run(Front(ActionKind::kRoute, "hold")).ok());
  ASSERT_TRUE(Run(Front(ActionKind::kRoute, "svc-b")).ok());
  EXPECT_THAT(front.calls, ElementsAre("hold", "route svc-b"));
  EXPECT_THAT(progress.str(), HasSubstr("front 8000: new requests go to svc-b"));
}

// No front seam bound (production binds HAProxy's at the composition root): a clear error.
TEST_F(FrontStepsTest, AFrontStepWithoutTheFrontSeamIsAnErrorNamingTheFront) {
  Status s = FrontSteps(nullptr, nullptr, &clock, nullptr)
                 .Run(ActionKind::kRoute, Front(ActionKind::kRoute, "svc-b").As<FrontStep>());
  EXPECT_EQ(s.code(), Status::Code::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("no front seam"));
  EXPECT_THAT(s.message(), HasSubstr("the front of port 8000"));
  EXPECT_TRUE(front.calls.empty());
}

TEST_F(FrontStepsTest, ADrainWaitsUntilNoRequestIsInFlight) {
  front.sessions = {3, 1, 0};
  Action a = Front(ActionKind::kDrain, "svc-a");
  a.As<FrontStep>().timeout_ms = 60000;
  ASSERT_TRUE(Run(a).ok());
  EXPECT_THAT(front.calls, ElementsAre("sessions svc-a", "sessions svc-a", "sessions svc-a"));
  EXPECT_THAT(progress.str(), HasSubstr("svc-a drained: no request in flight"));
}

TEST_F(FrontStepsTest, ADrainThatRunsOutGoesOnButAFrontThatCannotBeAskedFails) {
  front.sessions = {2};
  Action a = Front(ActionKind::kDrain, "svc-a");
  a.As<FrontStep>().timeout_ms = 5000;
  ASSERT_TRUE(Run(a).ok());  // the bound is the manifest's word on how long to wait
  EXPECT_THAT(progress.str(), HasSubstr("svc-a did not drain"));
  EXPECT_GE(clock.Elapsed(), std::chrono::milliseconds(5000));
  front.fail = Status::IoError("cannot reach /run/f/8000.sock");
  Status s = Run(a);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("cannot reach /run/f/8000.sock"));
}

TEST_F(FrontStepsTest, TheReadyPathTurns503ThenWaitsItsLead) {
  Action a = Front(ActionKind::kReady);
  a.As<FrontStep>().ready = false;
  a.As<FrontStep>().timeout_ms = 20000;
  ASSERT_TRUE(Run(a).ok());
  EXPECT_THAT(front.calls, ElementsAre("ready 503"));
  EXPECT_THAT(clock.sleeps, ElementsAre(std::chrono::milliseconds(20000)));
  a.As<FrontStep>().ready = true;
  a.As<FrontStep>().timeout_ms = 0;
  ASSERT_TRUE(Run(a).ok());
  EXPECT_THAT(front.calls, ElementsAre("ready 503", "ready 200"));
}

// A front's configuration as the planner renders it (HAProxy takes it), in its folder.
class FrontWriteTest : public FrontStepsTest {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("berth-front-steps-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  Action Write(const std::filesystem::path& dir, const std::string& active = "hold") {
    Action a = Front(ActionKind::kWriteFront);
    FrontSpec spec = DefaultFrontSpec(8000);
    spec.active = active;
    spec.backends = {{"svc-a", "127.0.0.1", 20001}};
    auto text = RenderHaproxyConfig(spec);
    EXPECT_TRUE(text.ok()) << text.status().message();
    a.As<FrontStep>().config = (dir / "8000.cfg").string();
    a.As<FrontStep>().config_text = text.ok() ? *text : "";
    a.As<FrontStep>().haproxy = "/usr/sbin/haproxy";
    return a;
  }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::filesystem::path root_;
};

TEST_F(FrontWriteTest, AConfigurationIsWrittenWithItsFoldersAndReloadedOnlyWhenTheFrontRuns) {
  Action a = Write(root_ / "a" / "b");
  ASSERT_TRUE(Run(a).ok());
  EXPECT_EQ(Read(a.As<FrontStep>().config), a.As<FrontStep>().config_text);
  EXPECT_TRUE(reloads.empty());
  a.As<FrontStep>().reload = true;
  ASSERT_TRUE(Run(a).ok());
  EXPECT_THAT(reloads, ElementsAre("/run/f/8000.master /run/f/8000.sock"));
  EXPECT_FALSE(std::filesystem::exists(root_ / "a" / "b" / ".8000.cfg.new"));
}

// A bind HAProxy cannot parse left PORT.cfg holding the refused configuration: the next restart
// of the front could not start. HAProxy checks it first now; the old file stays, byte for byte.
TEST_F(FrontWriteTest, AConfigurationHAProxyRefusesNeverReplacesTheFile) {
  Action good = Write(root_);
  ASSERT_TRUE(Run(good).ok());
  Action bad = Write(root_, "svc-a");
  bad.As<FrontStep>().config_text += "frontend broken\n  bind 127.0.0.1:18000:18000\n";
  bad.As<FrontStep>().reload = true;
  Status s = Run(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("refuses the new configuration of the front of port 8000"));
  EXPECT_THAT(s.message(), HasSubstr("8000.cfg is unchanged and the front serves on as before"));
  EXPECT_EQ(Read(good.As<FrontStep>().config), good.As<FrontStep>().config_text);
  EXPECT_TRUE(reloads.empty()) << "nothing to reload";
  EXPECT_FALSE(std::filesystem::exists(root_ / ".8000.cfg.new"));
}

// The running front refused to reload (its old worker serves on): the file it runs on goes back.
TEST_F(FrontWriteTest, ARefusedReloadPutsThePreviousFileBack) {
  Action before = Write(root_);
  ASSERT_TRUE(Run(before).ok());
  Action next = Write(root_, "svc-a");
  next.As<FrontStep>().reload = true;
  Status s = FrontSteps([this](const std::string&,
                               const std::string&) { return std::make_unique<Proxy>(&front); },
                        [](const std::string&, const std::string&, Clock&) {
                          return Status::Unavailable("the master says: reload failed");
                        },
                        &clock, nullptr)
                 .Run(ActionKind::kWriteFront, next.As<FrontStep>());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("its previous configuration file is back in"));
  EXPECT_THAT(s.message(), HasSubstr("reload failed"));
  EXPECT_EQ(Read(before.As<FrontStep>().config), before.As<FrontStep>().config_text);
}

// HAProxy runs as root and loads this file: a fronts' folder another user owns, or one its group
// or others may write, let that user put an `external-check command` root ran. Refused before
// anything is written, as sshd's StrictModes; a sticky folder of root's above it (/tmp) is fine.
TEST_F(FrontWriteTest, AFolderAnotherUserCouldWriteIsRefusedBeforeAnythingIsWritten) {
  std::filesystem::path dir = root_ / "fronts";
  std::filesystem::create_directories(dir);
  Action a = Write(dir);
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0) << "the tests run as root";
  Status owned = Run(a);
  ASSERT_FALSE(owned.ok());
  EXPECT_EQ(owned.code(), Status::Code::kPermissionDenied);
  EXPECT_THAT(owned.message(), HasSubstr("is owned by uid 65534, not root"));
  EXPECT_THAT(owned.message(), HasSubstr("chown root:root, chmod go-w"));
  ASSERT_EQ(::chown(dir.c_str(), 0, 0), 0);
  for (auto mode : {std::filesystem::perms::group_write, std::filesystem::perms::others_write}) {
    std::filesystem::permissions(dir, mode, std::filesystem::perm_options::add);
    Status writable = Run(a);
    ASSERT_FALSE(writable.ok());
    EXPECT_THAT(writable.message(), HasSubstr("fronts is writable by its"));
    std::filesystem::permissions(dir, mode, std::filesystem::perm_options::remove);
  }
  // A parent of it, world-writable without the sticky bit: anyone could rename the folder away.
  std::filesystem::permissions(root_, std::filesystem::perms::others_write,
                               std::filesystem::perm_options::add);
  EXPECT_THAT(Run(a).message(), HasSubstr(root_.string() + " is writable by its other users"));
  std::filesystem::permissions(root_, std::filesystem::perms::others_write,
                               std::filesystem::perm_options::remove);
  EXPECT_FALSE(std::filesystem::exists(dir / "8000.cfg")) << "nothing was written";
  EXPECT_TRUE(Run(a).ok());
}

}  // namespace
}  // namespace berth::testing
