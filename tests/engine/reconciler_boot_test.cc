// Boot state through the Reconciler on an in-memory host: a switch enables the new service and
// disables the old once the new one is healthy; a failed switch leaves the boot state alone; a
// unit systemd cannot enable is left alone and the plan says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/engine/reconciler_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST_F(ReconcilerTest, ASwitchEnablesTheNewServiceAndDisablesTheOldOnceTheNewIsHealthy) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  EXPECT_THAT(world.calls, ::testing::Contains("enable vllm-kimi.service"));
  EXPECT_EQ(Unit("vllm-kimi.service")->unit_file_state, "enabled");
  world.calls.clear();

  RunReport r = Apply("minimax");
  ASSERT_EQ(r.outcome, Outcome::kApplied) << err.str();
  auto pos = [&](const std::string& c) {
    auto it = std::find(world.calls.begin(), world.calls.end(), c);
    EXPECT_NE(it, world.calls.end()) << c << " not called";
    return it - world.calls.begin();
  };
  EXPECT_LT(pos("stop vllm-kimi.service"), pos("start vllm-minimax.service"));
  EXPECT_LT(pos("probe 8000"), pos("enable vllm-minimax.service")) << "enabled once healthy";
  EXPECT_LT(pos("enable vllm-minimax.service"), pos("disable vllm-kimi.service"));
  EXPECT_EQ(Unit("vllm-minimax.service")->unit_file_state, "enabled");
  EXPECT_EQ(Unit("vllm-kimi.service")->unit_file_state, "disabled");
  EXPECT_THAT(out.str(), HasSubstr("+ enable        unit/vllm-minimax.service"));
  EXPECT_THAT(out.str(), HasSubstr("- disable       unit/vllm-kimi.service"));
  EXPECT_EQ(Plan("minimax").outcome, Outcome::kNoChanges) << out.str();
}

TEST_F(ReconcilerTest, AFailedSwitchIsRolledBackWithTheBootStateUntouched) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.calls.clear();
  world.never_healthy.insert("vllm-minimax.service");
  RunReport r = Apply("minimax");
  ASSERT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_TRUE(r.exec.rolled_back);
  EXPECT_THAT(world.calls, Not(::testing::Contains("enable vllm-minimax.service")));
  EXPECT_THAT(world.calls, Not(::testing::Contains("disable vllm-kimi.service")));
  EXPECT_EQ(Unit("vllm-kimi.service")->unit_file_state, "enabled") << "a reboot brings Kimi back";
  EXPECT_EQ(Unit("vllm-minimax.service")->unit_file_state, "disabled");

  world.never_healthy.clear();
  retry = true;  // the change is held after its failure: the operator retries it
  ASSERT_EQ(Apply("minimax").outcome, Outcome::kApplied) << err.str();
  EXPECT_EQ(Unit("vllm-minimax.service")->unit_file_state, "enabled");
  EXPECT_EQ(Unit("vllm-kimi.service")->unit_file_state, "disabled");
  EXPECT_EQ(Plan("minimax").outcome, Outcome::kNoChanges) << out.str();
}

TEST_F(ReconcilerTest, AMaskedUnitIsNotEnabledAndThePlanSaysWhy) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  world.host.SetUnitFileState("vllm-kimi.service", "masked");
  world.calls.clear();
  RunReport r = Apply("kimi");
  EXPECT_EQ(r.outcome, Outcome::kNoChanges) << out.str();
  EXPECT_THAT(world.calls, Not(::testing::Contains("enable vllm-kimi.service")));
  Plan("kimi");
  EXPECT_THAT(out.str(), HasSubstr("unit/vllm-kimi.service  masked: berth does not change its "
                                   "boot state"));
}

TEST_F(ReconcilerTest, AnEnableSystemdRefusesFailsTheStepAndSaysWhy) {
  ASSERT_EQ(Apply("kimi").outcome, Outcome::kApplied) << err.str();
  // Disabled by hand, then masked behind berth's back between plan and enable.
  world.host.SetUnitFileState("vllm-kimi.service", "disabled");
  world.on_job = [&](const std::string& verb, const std::string& unit) {
    if (verb == "enable") world.host.SetUnitFileState(unit, "masked");
  };
  RunReport r = Apply("kimi");
  EXPECT_EQ(r.outcome, Outcome::kFailed);
  EXPECT_THAT(r.status.message(), HasSubstr("step 1 (enable unit/vllm-kimi.service)"));
  EXPECT_THAT(r.status.message(), HasSubstr("masked"));
}

}  // namespace
}  // namespace berth::testing
