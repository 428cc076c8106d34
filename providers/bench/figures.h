// The figures of a load run, computed from what each request's stream looked like (when it was
// sent, when each content chunk arrived, the tokens it is credited with, how it ended), with the
// definitions of `vllm bench serve` so that berth's figures compare with the tools operators
// already use. Pure: no clock, no I/O; the load generator feeds it, tests feed it scripted
// timings. Also the arrival times of a request rate (a Poisson process, seedable).
//
// The definitions follow vllm-project/vllm at commit def9ce85ba1079af970a58ed3d42dd861ae35d58,
// vllm/benchmarks/serve.py (calculate_metrics, get_request) and, at commit
// 3aee4a4f4c4d1a2a7af3ebdb88c768e459e6c602, vllm/benchmarks/lib/endpoint_request_func.py (the
// time of each chunk); docs/bench.md states them for operators.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace berth {

struct LoadFigures;
struct LoadSpec;

/// One request as the figures see it. Times are milliseconds on one monotonic clock.
struct RequestTiming {
  enum class End {
    kFinished,  // ended with [DONE]: every figure
    kCut,       // still streaming when the measured time ended: TTFT and ITL, no E2E or TPOT
    kFailed,    // transport, status or stream error: counted as an error, in no latency figure
  };
  End end = End::kFinished;
  double start_ms = 0;           // the request was sent (after any wait for a free stream)
  std::vector<double> chunk_ms;  // each content chunk's arrival, in order
  uint64_t tokens = 0;           // output tokens credited (CountedTokens in load.cc)
  /// The server's own account of a finished request, where it gave one (llama.cpp's timings:
  /// StreamEvent's predicted_n and predicted_ms); the load generator keeps it only within the
  /// request's max_tokens.
  bool has_server_account = false;
  uint64_t server_tokens = 0;
  double server_decode_ms = 0;
};

/// At most `cap` samples, each of the values seen equally likely to be kept (a seeded RNG, so
/// a run's figures do not depend on anything but its samples).
class Reservoir {
 public:
  explicit Reservoir(size_t cap) : cap_(cap) {}
  void Add(double x);
  std::vector<double>* samples() { return &samples_; }
  uint64_t seen() const { return seen_; }
  double sum() const { return sum_; }  // of every value seen, kept or not
  double Mean() const { return seen_ ? sum_ / static_cast<double>(seen_) : 0; }

 private:
  size_t cap_;
  uint64_t seen_ = 0;
  double sum_ = 0;
  std::vector<double> samples_;
  std::minstd_rand rng_{12345};
};

/// Folds requests into figures:
///   TTFT   request sent to its first content chunk (finished and cut requests);
///   ITL    every gap between two consecutive content chunks of a request, pooled over requests
///          (finished and cut);
///   E2E    request sent to its last content chunk (finished requests; vLLM's "E2EL");
///   TPOT   (E2E - TTFT) / (output tokens - 1), per finished request with more than one token;
///   goodput  finished requests meeting every limit given (TTFT, TPOT, E2E; a request of one
///          token has a TPOT of 0 there, as in vLLM), per second;
///   output tok/s, requests/s: credited tokens and finished requests per measured second;
///   per-user tok/s: 1000 / TPOT in ms (at TPOT's mean and median);
///   the server's account: over the finished requests that carried one, their tokens and decode
///          milliseconds summed, and the mean of decode ms / (tokens - 1) over those with more
///          than one token (llama.cpp's predicted_per_token_ms: the TPOT it measured itself).
/// Percentiles interpolate linearly between ranks (numpy.percentile's default, which vLLM
/// uses). Means are over every value, percentiles over at most `max_samples` kept per figure.
class FigureBuilder {
 public:
  explicit FigureBuilder(const LoadSpec& spec);
  void Add(const RequestTiming& request);
  /// The figures of what was added over `seconds` of measured time. `out` keeps its errors,
  /// first_error, concurrency and cancelled counts; the rest is filled in.
  void Fill(double seconds, LoadFigures* out);

 private:
  double ttft_limit_ms_, tpot_limit_ms_, e2e_limit_ms_;
  uint64_t requests_ = 0, good_ = 0, failed_ = 0, cut_ = 0, tokens_ = 0;
  Reservoir ttft_, itl_, tpot_, e2e_;
  uint64_t server_requests_ = 0, server_tokens_ = 0, server_tpots_ = 0;
  double server_decode_ms_ = 0, server_tpot_sum_ms_ = 0;
};

/// The value at `q` (0..1) of `samples`, interpolated linearly between the two nearest ranks
/// (numpy.percentile's default); sorts them. 0 when empty.
double Percentile(std::vector<double>* samples, double q);

/// Request arrivals at `rate` per second as a Poisson process: the gaps between them are drawn
/// from an exponential distribution of mean 1/rate (vLLM's --request-rate with its default
/// --burstiness 1, a gamma of shape 1). The same seed gives the same schedule.
class PoissonArrivals {
 public:
  PoissonArrivals(double rate_per_second, uint64_t seed) : rng_(seed), gap_(rate_per_second) {}
  /// The next gap, in seconds.
  double NextGapSeconds() { return gap_(rng_); }

 private:
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
};

/// The arrival times (seconds after the start, the first one's included) of `n` requests at
/// `rate` per second, scaled as vLLM scales them so that the last arrives at exactly n / rate
/// (its get_request: the sum of random gaps misses the target by a few percent otherwise).
std::vector<double> ArrivalSchedule(uint64_t n, double rate_per_second, uint64_t seed);

}  // namespace berth
