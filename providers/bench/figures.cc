#include "providers/bench/figures.h"

#include <algorithm>
#include <cmath>

#include "providers/bench/load.h"

namespace berth {

void Reservoir::Add(double x) {
  ++seen_;
  sum_ += x;
  if (samples_.size() < cap_) {
    samples_.push_back(x);
    return;
  }
  uint64_t j = std::uniform_int_distribution<uint64_t>(0, seen_ - 1)(rng_);
  if (j < cap_) samples_[j] = x;
}

double Percentile(std::vector<double>* samples, double q) {
  if (samples->empty()) return 0;
  if (!std::is_sorted(samples->begin(), samples->end()))
    std::sort(samples->begin(), samples->end());
  double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(samples->size() - 1);
  size_t below = static_cast<size_t>(std::floor(rank));
  size_t above = std::min(below + 1, samples->size() - 1);
  double lo = (*samples)[below], hi = (*samples)[above];
  return lo + (hi - lo) * (rank - static_cast<double>(below));
}

FigureBuilder::FigureBuilder(const LoadSpec& spec)
    : ttft_limit_ms_(spec.goodput_ttft_ms),
      tpot_limit_ms_(spec.goodput_tpot_ms),
      e2e_limit_ms_(spec.goodput_e2e_ms),
      ttft_(spec.max_samples),
      itl_(spec.max_samples),
      tpot_(spec.max_samples),
      e2e_(spec.max_samples) {}

void FigureBuilder::Add(const RequestTiming& r) {
  if (r.end == RequestTiming::End::kFailed) {
    ++failed_;
    return;
  }
  tokens_ += r.tokens;
  if (r.end == RequestTiming::End::kCut) ++cut_;
  const std::vector<double>& c = r.chunk_ms;
  double ttft = 0, e2e = 0, tpot = 0;
  if (!c.empty()) {
    ttft = c.front() - r.start_ms;
    e2e = c.back() - r.start_ms;
    ttft_.Add(ttft);
    for (size_t i = 1; i < c.size(); ++i) itl_.Add(c[i] - c[i - 1]);
  }
  if (r.end != RequestTiming::End::kFinished) return;
  ++requests_;
  if (r.has_server_account) {
    ++server_requests_;
    server_tokens_ += r.server_tokens;
    server_decode_ms_ += r.server_decode_ms;
    if (r.server_tokens > 1) {
      ++server_tpots_;
      server_tpot_sum_ms_ += r.server_decode_ms / static_cast<double>(r.server_tokens - 1);
    }
  }
  if (c.empty()) return;  // [DONE] without content: no latency to speak of
  e2e_.Add(e2e);
  if (r.tokens > 1) {
    tpot = (e2e - ttft) / static_cast<double>(r.tokens - 1);
    tpot_.Add(tpot);
  }
  // vLLM: a request of one token has a TPOT of 0 for goodput; a limit holds when value <= it.
  bool good = (ttft_limit_ms_ <= 0 || ttft <= ttft_limit_ms_) &&
              (tpot_limit_ms_ <= 0 || tpot <= tpot_limit_ms_) &&
              (e2e_limit_ms_ <= 0 || e2e <= e2e_limit_ms_);
  if (good) ++good_;
}

void FigureBuilder::Fill(double seconds, LoadFigures* r) {
  auto per_second = [seconds](double n) { return seconds > 0 ? n / seconds : 0; };
  r->requests = requests_;
  r->output_tokens = tokens_;
  r->seconds = seconds;
  r->output_tps = per_second(static_cast<double>(tokens_));
  r->request_tps = per_second(static_cast<double>(requests_));
  r->ttft_mean_ms = ttft_.Mean();
  r->ttft_p50_ms = Percentile(ttft_.samples(), 0.50);
  r->ttft_p90_ms = Percentile(ttft_.samples(), 0.90);
  r->ttft_p99_ms = Percentile(ttft_.samples(), 0.99);
  r->itl_mean_ms = itl_.Mean();
  r->itl_p50_ms = Percentile(itl_.samples(), 0.50);
  r->itl_p90_ms = Percentile(itl_.samples(), 0.90);
  r->itl_p99_ms = Percentile(itl_.samples(), 0.99);
  r->tpot_mean_ms = tpot_.Mean();
  r->tpot_p50_ms = Percentile(tpot_.samples(), 0.50);
  r->tpot_p90_ms = Percentile(tpot_.samples(), 0.90);
  r->tpot_p99_ms = Percentile(tpot_.samples(), 0.99);
  r->e2e_mean_ms = e2e_.Mean();
  r->e2e_p50_ms = Percentile(e2e_.samples(), 0.50);
  r->e2e_p90_ms = Percentile(e2e_.samples(), 0.90);
  r->e2e_p99_ms = Percentile(e2e_.samples(), 0.99);
  r->user_tps_mean = r->tpot_mean_ms > 0 ? 1000 / r->tpot_mean_ms : 0;
  r->user_tps_p50 = r->tpot_p50_ms > 0 ? 1000 / r->tpot_p50_ms : 0;
  r->has_goodput = ttft_limit_ms_ > 0 || tpot_limit_ms_ > 0 || e2e_limit_ms_ > 0;
  r->good_requests = r->has_goodput ? good_ : 0;
  r->goodput_rps = per_second(static_cast<double>(r->good_requests));
  r->server_requests = server_requests_;
  r->server_output_tokens = server_tokens_;
  r->server_decode_ms = server_decode_ms_;
  r->server_tpot_mean_ms =
      server_tpots_ ? server_tpot_sum_ms_ / static_cast<double>(server_tpots_) : 0;
}

std::vector<double> ArrivalSchedule(uint64_t n, double rate_per_second, uint64_t seed) {
  std::vector<double> at;
  if (n == 0 || !(rate_per_second > 0)) return at;
  PoissonArrivals arrivals(rate_per_second, seed);
  at.reserve(n);
  double t = 0;
  for (uint64_t i = 0; i < n; ++i) at.push_back(t += arrivals.NextGapSeconds());
  if (t > 0) {
    double scale = static_cast<double>(n) / rate_per_second / t;
    for (double& x : at) x *= scale;
  }
  return at;
}

}  // namespace berth
