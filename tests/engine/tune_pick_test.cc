// berth tune's choice of the best candidate (PickWinner, engine/tune/tune.h): the highest metric
// among the measured candidates that meet every limit; failed requests disqualify; nothing
// measured or nothing within the limits is no winner, each candidate saying what it missed.
#include <gmock/gmock.h>

#include "engine/tune/tune.h"

namespace berth {
namespace {

using Verdict = TuneOutcome::Verdict;

TuneOutcome Measured(const std::string& name, double tps, double ttft_p99, double goodput = 0,
                     uint64_t errors = 0) {
  TuneOutcome o;
  o.candidate.name = name;
  o.verdict = Verdict::kMeasured;
  TuneFigures f;
  f.requests = 32;
  f.errors = errors;
  f.output_tps = tps;
  f.goodput_rps = goodput;
  f.ttft_p99_ms = ttft_p99;
  f.tpot_p99_ms = 20;
  o.figures = f;
  return o;
}

TEST(TunePick, TheFastestWithinTheLimitsWinsAndTheOthersSayWhatTheyMissed) {
  std::vector<TuneOutcome> outcomes = {Measured("tp4", 2500, 300), Measured("tp8", 3300, 400),
                                       Measured("tp8-ep", 4000, 900)};
  TuneObjective o;
  o.ttft_p99_ms = 500;
  ASSERT_EQ(PickWinner(o, &outcomes), std::optional<size_t>(1));
  EXPECT_TRUE(outcomes[0].meets_limits);
  EXPECT_FALSE(outcomes[2].meets_limits);
  EXPECT_EQ(outcomes[2].missed, "TTFT p99 900ms > 500ms");
  // Without the limit the fastest wins.
  o.ttft_p99_ms = 0;
  EXPECT_EQ(PickWinner(o, &outcomes), std::optional<size_t>(2));
  EXPECT_TRUE(outcomes[2].missed.empty());
}

TEST(TunePick, GoodputRanksByGoodRequestsNotTokens) {
  std::vector<TuneOutcome> outcomes = {Measured("a", 4000, 100, /*goodput=*/3),
                                       Measured("b", 3000, 100, /*goodput=*/5)};
  TuneObjective o;
  o.maximize = TuneObjective::Metric::kGoodput;
  o.tpot_p99_ms = 50;
  EXPECT_EQ(PickWinner(o, &outcomes), std::optional<size_t>(1));
}

TEST(TunePick, FailedRequestsAndUnmeasuredCandidatesNeverWin) {
  TuneOutcome failed;
  failed.candidate.name = "mtp";
  failed.verdict = Verdict::kFailed;
  TuneOutcome empty = Measured("empty", 0, 0);
  empty.figures->requests = 0;
  std::vector<TuneOutcome> outcomes = {Measured("erring", 9000, 10, 0, /*errors=*/3), failed,
                                       empty};
  EXPECT_EQ(PickWinner(TuneObjective{}, &outcomes), std::nullopt);
  EXPECT_EQ(outcomes[0].missed, "3 of 32 requests failed");
  EXPECT_EQ(outcomes[2].missed, "no request was measured");
  EXPECT_FALSE(outcomes[1].meets_limits);
}

}  // namespace
}  // namespace berth
