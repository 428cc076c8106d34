// The executor's front steps (engine/apply/front_steps.h) against a fake front: which call each
// step makes, that a drain running out is not a failure while a front that cannot be asked is,
// that the ready step waits its lead, and that a configuration is written (its folder with its
// parents) and reloaded only when the plan says the front runs.
#include "engine/apply/front_steps.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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
    return FrontSteps([this](const std::string&) { return std::make_unique<Proxy>(&front); },
                      [this](const std::string& m, const std::string& a) {
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

TEST_F(FrontStepsTest, AConfigurationIsWrittenWithItsFoldersAndReloadedOnlyWhenTheFrontRuns) {
  auto dir = std::filesystem::temp_directory_path() /
             ("berth-front-steps-" + std::to_string(::getpid())) / "a" / "b";
  Action a = Front(ActionKind::kWriteFront);
  a.As<FrontStep>().config = (dir / "8000.cfg").string();
  a.As<FrontStep>().config_text = "# berth-front-active: hold\nglobal\n";
  ASSERT_TRUE(Run(a).ok());
  std::ifstream in(a.As<FrontStep>().config);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), a.As<FrontStep>().config_text);
  EXPECT_TRUE(reloads.empty());
  a.As<FrontStep>().reload = true;
  ASSERT_TRUE(Run(a).ok());
  EXPECT_THAT(reloads, ElementsAre("/run/f/8000.master /run/f/8000.sock"));
  std::filesystem::remove_all(dir.parent_path().parent_path());
}

}  // namespace
}  // namespace berth::testing
