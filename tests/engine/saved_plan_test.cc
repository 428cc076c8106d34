// The reasons a saved plan is refused, as the operator reads them.
#include "engine/apply/saved_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace berth {
namespace {

using ::testing::ElementsAre;

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

}  // namespace
}  // namespace berth
