// The figures' definitions, proven on scripted timings whose TTFT, TPOT, ITL and E2E are known
// in advance (no server, no clock), and the Poisson arrivals on their statistics. The same
// definitions as vllm bench serve (figures.h cites the file and commit).
#include "providers/bench/figures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "providers/bench/load.h"

namespace berth {
namespace {

using End = RequestTiming::End;

RequestTiming Request(End end, double start, std::vector<double> chunks, uint64_t tokens) {
  RequestTiming r;
  r.end = end;
  r.start_ms = start;
  r.chunk_ms = std::move(chunks);
  r.tokens = tokens;
  return r;
}

// The server's own account (llama.cpp's timings) is summed over the finished requests that
// carried it; its TPOT is decode ms / (tokens - 1) per request, averaged as berth's is. A cut or
// failed request's account is in no figure, nor is a request without one.
TEST(FigureBuilder, TheServersOwnAccountBesideBerths) {
  LoadSpec spec;
  FigureBuilder b(spec);
  auto with_account = [](RequestTiming r, uint64_t tokens, double ms) {
    r.has_server_account = true;
    r.server_tokens = tokens;
    r.server_decode_ms = ms;
    return r;
  };
  b.Add(with_account(Request(End::kFinished, 0, {100, 110, 130}, 3), 3, 28));  // TPOT 14
  b.Add(with_account(Request(End::kFinished, 0, {100}, 1), 1, 0));             // one token: no TPOT
  b.Add(with_account(Request(End::kFinished, 0, {100, 140}, 2), 2, 38));       // TPOT 38
  b.Add(Request(End::kFinished, 0, {100, 140}, 2));
  b.Add(with_account(Request(End::kCut, 0, {100, 140}, 2), 2, 1000));
  b.Add(with_account(Request(End::kFailed, 0, {}, 0), 5, 1000));
  LoadFigures f;
  b.Fill(1.0, &f);
  EXPECT_EQ(f.requests, 4u);
  EXPECT_EQ(f.server_requests, 3u);
  EXPECT_EQ(f.server_output_tokens, 6u);
  EXPECT_DOUBLE_EQ(f.server_decode_ms, 66);
  EXPECT_DOUBLE_EQ(f.server_tpot_mean_ms, (14 + 38) / 2.0);
  EXPECT_DOUBLE_EQ(f.tpot_mean_ms, (15 + 40 + 40) / 3.0);  // berth's own, unchanged

  FigureBuilder none(spec);
  none.Add(Request(End::kFinished, 0, {100, 110}, 2));
  none.Fill(1.0, &f);
  EXPECT_EQ(f.server_requests, 0u);
  EXPECT_DOUBLE_EQ(f.server_tpot_mean_ms, 0);
}

// Two finished requests with known timings:
//   A: sent at 0, chunks at 100, 110, 130 (3 tokens): TTFT 100, ITLs 10 and 20, E2E 130,
//      TPOT (130 - 100) / (3 - 1) = 15.
//   B: sent at 50, chunks at 250, 290 (2 tokens): TTFT 200, ITL 40, E2E 240, TPOT 40.
TEST(FigureBuilder, EachFigureAsVllmDefinesIt) {
  LoadSpec spec;
  FigureBuilder b(spec);
  b.Add(Request(End::kFinished, 0, {100, 110, 130}, 3));
  b.Add(Request(End::kFinished, 50, {250, 290}, 2));
  LoadFigures f;
  b.Fill(2.0, &f);
  EXPECT_EQ(f.requests, 2u);
  EXPECT_EQ(f.output_tokens, 5u);
  EXPECT_DOUBLE_EQ(f.seconds, 2.0);
  EXPECT_DOUBLE_EQ(f.output_tps, 2.5);
  EXPECT_DOUBLE_EQ(f.request_tps, 1.0);
  // TTFT {100, 200}: linear interpolation between ranks, as numpy.percentile.
  EXPECT_DOUBLE_EQ(f.ttft_mean_ms, 150);
  EXPECT_DOUBLE_EQ(f.ttft_p50_ms, 150);
  EXPECT_DOUBLE_EQ(f.ttft_p90_ms, 190);
  EXPECT_DOUBLE_EQ(f.ttft_p99_ms, 199);
  // ITL pooled over requests: {10, 20, 40}.
  EXPECT_DOUBLE_EQ(f.itl_mean_ms, 70.0 / 3);
  EXPECT_DOUBLE_EQ(f.itl_p50_ms, 20);
  EXPECT_DOUBLE_EQ(f.itl_p90_ms, 36);
  EXPECT_DOUBLE_EQ(f.itl_p99_ms, 39.6);
  // TPOT per request: {15, 40}; it is not the mean ITL (70/3), as in vLLM.
  EXPECT_DOUBLE_EQ(f.tpot_mean_ms, 27.5);
  EXPECT_DOUBLE_EQ(f.tpot_p50_ms, 27.5);
  EXPECT_DOUBLE_EQ(f.tpot_p90_ms, 37.5);
  EXPECT_DOUBLE_EQ(f.tpot_p99_ms, 39.75);
  // E2E: {130, 240}.
  EXPECT_DOUBLE_EQ(f.e2e_mean_ms, 185);
  EXPECT_DOUBLE_EQ(f.e2e_p50_ms, 185);
  EXPECT_DOUBLE_EQ(f.e2e_p99_ms, 238.9);
  // Per user: 1000 / TPOT ms.
  EXPECT_DOUBLE_EQ(f.user_tps_mean, 1000 / 27.5);
  EXPECT_DOUBLE_EQ(f.user_tps_p50, 1000 / 27.5);
  // No limits given: no goodput.
  EXPECT_FALSE(f.has_goodput);
  EXPECT_EQ(f.good_requests, 0u);
  EXPECT_DOUBLE_EQ(f.goodput_rps, 0);
}

// TPOT divides by the tokens credited, not the chunks: a chunk may carry several tokens.
TEST(FigureBuilder, TpotCountsTokensNotChunks) {
  LoadSpec spec;
  FigureBuilder b(spec);
  // 2 chunks, 11 tokens (usage): TTFT 100, E2E 600, TPOT (600 - 100) / 10 = 50.
  b.Add(Request(End::kFinished, 0, {100, 600}, 11));
  LoadFigures f;
  b.Fill(1.0, &f);
  EXPECT_DOUBLE_EQ(f.tpot_p50_ms, 50);
  EXPECT_DOUBLE_EQ(f.itl_p50_ms, 500);  // the gap between chunks, whatever they carry
  EXPECT_DOUBLE_EQ(f.user_tps_p50, 20);
}

// A request of one token has a TTFT and an E2E but no TPOT (vLLM: output_len > 1), and no ITL.
TEST(FigureBuilder, OneTokenHasNoTpot) {
  LoadSpec spec;
  FigureBuilder b(spec);
  b.Add(Request(End::kFinished, 0, {80}, 1));
  LoadFigures f;
  b.Fill(1.0, &f);
  EXPECT_EQ(f.requests, 1u);
  EXPECT_DOUBLE_EQ(f.ttft_p50_ms, 80);
  EXPECT_DOUBLE_EQ(f.e2e_p50_ms, 80);
  EXPECT_DOUBLE_EQ(f.tpot_p50_ms, 0);
  EXPECT_DOUBLE_EQ(f.itl_p50_ms, 0);
  EXPECT_DOUBLE_EQ(f.user_tps_p50, 0);
}

// A request cut at the end of a measured duration has a TTFT and ITLs (the time it had) and
// its tokens, but is not a finished request: no E2E, no TPOT, not in requests/s. A failed one
// is in no figure.
TEST(FigureBuilder, CutRequestsGiveTtftAndItlOnlyFailedOnesNothing) {
  LoadSpec spec;
  FigureBuilder b(spec);
  b.Add(Request(End::kFinished, 0, {10, 20}, 2));
  b.Add(Request(End::kCut, 0, {30, 35, 45}, 3));
  b.Add(Request(End::kFailed, 0, {1, 2, 3, 4}, 0));
  LoadFigures f;
  b.Fill(1.0, &f);
  EXPECT_EQ(f.requests, 1u);
  EXPECT_EQ(f.output_tokens, 5u);
  EXPECT_DOUBLE_EQ(f.ttft_mean_ms, 20);       // {10, 30}
  EXPECT_DOUBLE_EQ(f.itl_mean_ms, 25.0 / 3);  // {10, 5, 10}
  EXPECT_DOUBLE_EQ(f.e2e_mean_ms, 20);        // the finished one only
  EXPECT_DOUBLE_EQ(f.tpot_mean_ms, 10);
  EXPECT_DOUBLE_EQ(f.request_tps, 1);
}

// Goodput: finished requests meeting every limit given (a value equal to its limit meets it),
// per second. A one-token request has a TPOT of 0 there, as in vLLM.
TEST(FigureBuilder, GoodputCountsRequestsWithinEveryLimit) {
  LoadSpec spec;
  spec.goodput_ttft_ms = 100;
  spec.goodput_tpot_ms = 20;
  FigureBuilder b(spec);
  b.Add(Request(End::kFinished, 0, {100, 120, 140}, 3));  // TTFT 100, TPOT 20: good
  b.Add(Request(End::kFinished, 0, {101, 102}, 2));       // TTFT 101: not
  b.Add(Request(End::kFinished, 0, {50, 100}, 2));        // TPOT 50: not
  b.Add(Request(End::kFinished, 0, {60}, 1));             // TPOT 0: good
  b.Add(Request(End::kCut, 0, {10, 11}, 2));              // not finished: not counted
  LoadFigures f;
  b.Fill(4.0, &f);
  EXPECT_TRUE(f.has_goodput);
  EXPECT_EQ(f.good_requests, 2u);
  EXPECT_DOUBLE_EQ(f.goodput_rps, 0.5);

  LoadSpec e2e;
  e2e.goodput_e2e_ms = 130;
  FigureBuilder b2(e2e);
  b2.Add(Request(End::kFinished, 0, {100, 130}, 2));
  b2.Add(Request(End::kFinished, 0, {100, 131}, 2));
  LoadFigures g;
  b2.Fill(1.0, &g);
  EXPECT_EQ(g.good_requests, 1u);
}

TEST(FigureBuilder, MeansCountEverySampleBeyondTheReservoir) {
  LoadSpec spec;
  spec.max_samples = 10;
  FigureBuilder b(spec);
  for (int i = 1; i <= 1000; ++i) b.Add(Request(End::kFinished, 0, {static_cast<double>(i)}, 1));
  LoadFigures f;
  b.Fill(1.0, &f);
  EXPECT_DOUBLE_EQ(f.ttft_mean_ms, 500.5);
  EXPECT_EQ(f.requests, 1000u);
}

TEST(Percentile, InterpolatesBetweenRanksAsNumpy) {
  std::vector<double> v = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  // numpy.percentile([1..10], [50, 90, 99, 0, 100]) = 5.5, 9.1, 9.91, 1, 10.
  EXPECT_DOUBLE_EQ(Percentile(&v, 0.5), 5.5);
  EXPECT_DOUBLE_EQ(Percentile(&v, 0.9), 9.1);
  EXPECT_DOUBLE_EQ(Percentile(&v, 0.99), 9.91);
  EXPECT_DOUBLE_EQ(Percentile(&v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(&v, 1), 10);
  std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(Percentile(&one, 0.99), 7);
  std::vector<double> none;
  EXPECT_DOUBLE_EQ(Percentile(&none, 0.5), 0);
}

// The gaps of a Poisson process at rate r are exponential of mean 1/r: over 200,000 draws the
// mean is within 1% and the standard deviation (equal to the mean for an exponential) within
// 2%. Counts, not wall-clock time.
TEST(PoissonArrivals, GapsAreExponentialOfMeanOneOverRate) {
  PoissonArrivals a(8.0, 42);
  const int n = 200000;
  std::vector<double> gaps(n);
  for (double& g : gaps) g = a.NextGapSeconds();
  double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / n;
  double var = 0;
  for (double g : gaps) var += (g - mean) * (g - mean);
  double sd = std::sqrt(var / (n - 1));
  EXPECT_NEAR(mean, 0.125, 0.125 * 0.01);
  EXPECT_NEAR(sd, 0.125, 0.125 * 0.02);
  // P(gap > mean) = 1/e for an exponential.
  double longer = static_cast<double>(
                      std::count_if(gaps.begin(), gaps.end(), [](double g) { return g > 0.125; })) /
                  n;
  EXPECT_NEAR(longer, std::exp(-1.0), 0.01);
}

TEST(PoissonArrivals, TheSameSeedGivesTheSameSchedule) {
  EXPECT_EQ(ArrivalSchedule(100, 5, 7), ArrivalSchedule(100, 5, 7));
  EXPECT_NE(ArrivalSchedule(100, 5, 7), ArrivalSchedule(100, 5, 8));
}

// vLLM scales the cumulative arrival times so that the last one falls at n / rate.
TEST(PoissonArrivals, AScheduleOfNEndsAtNOverRate) {
  std::vector<double> at = ArrivalSchedule(1000, 20, 1);
  ASSERT_EQ(at.size(), 1000u);
  EXPECT_NEAR(at.back(), 50.0, 1e-9);
  EXPECT_GT(at.front(), 0);
  EXPECT_TRUE(std::is_sorted(at.begin(), at.end()));
  EXPECT_TRUE(ArrivalSchedule(0, 20, 1).empty());
  EXPECT_TRUE(ArrivalSchedule(10, 0, 1).empty());
}

}  // namespace
}  // namespace berth
