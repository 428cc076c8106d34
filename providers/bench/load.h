// A load generator for OpenAI-compatible model servers (vLLM, SGLang, llama-server): N streams
// of streamed completions kept busy for a while, measured as an operator benchmarks a model
// (output tokens per second, time to first token, inter-token latency, and the rest of what
// `vllm bench serve` reports: figures.h). `berth bench` and a switch's throughput gate call it.
// One thread, io_uring (or epoll where the kernel refuses it), its own HTTP/1.1 reader, every
// answer untrusted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "providers/bench/figures.h"

namespace berth {

struct LoadSpec {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string model;        // the served name (the request's "model")
  bool chat = false;        // /v1/chat/completions (messages) instead of /v1/completions
  std::string prompt;       // "" = a made-up prompt of prompt_tokens words, new per request
  int prompt_tokens = 128;  // the made-up prompt's length in words (about one token each)
  int max_tokens = 256;     // per request
  bool ignore_eos = true;   // ask vLLM/SGLang to generate max_tokens whatever the text
  int concurrency = 1;      // streams kept in flight
  std::chrono::milliseconds duration{10000};          // how long to measure
  std::chrono::milliseconds request_timeout{300000};  // one request, connect to last byte
  std::chrono::milliseconds connect_timeout{5000};
  /// Stop early once this many requests failed (a dead server is not hammered for the whole
  /// duration); 0: never.
  int max_errors = 100;
  /// The longest event (and line) accepted from the server; the answer of an error status is
  /// kept up to 4 KiB.
  size_t max_event_bytes = size_t{1} << 20;
  /// Latency samples kept (reservoir sampling beyond it), per kind.
  size_t max_samples = 200000;
  /// Requests to send in all (vLLM's --num-prompts); the run ends when every one has ended,
  /// whatever `duration`. 0: keep sending for `duration` (the closed loop).
  uint64_t num_prompts = 0;
  /// Requests started per second on average, as a Poisson process (vLLM's --request-rate),
  /// never more than `concurrency` in flight (a request due while every stream is busy waits
  /// for one; its TTFT counts from when it is sent, as in vLLM). 0: as fast as `concurrency`
  /// allows (each stream sends its next request when the last one ends).
  double request_rate = 0;
  /// Seeds the arrival times of `request_rate` (the same seed, the same schedule).
  uint64_t seed = 0;
  /// Requests run to their end before measuring, at most `concurrency` at a time, and left out
  /// of every figure (vLLM's --num-warmups); 0: none.
  uint64_t warmup_requests = 0;
  /// Or a warm-up of this long: the load runs as measured, then the requests still in flight
  /// are cancelled and measuring starts; 0: none.
  std::chrono::milliseconds warmup_duration{0};
  /// Goodput's limits (vLLM's --goodput ttft:MS tpot:MS e2el:MS): a finished request is good
  /// when it meets every limit given. 0: that limit is not given; none given: no goodput.
  double goodput_ttft_ms = 0;
  double goodput_tpot_ms = 0;
  double goodput_e2e_ms = 0;
  /// Read the streams through io_uring (uring.h: one system call per wake-up for every socket
  /// ready, instead of an epoll_wait and a recv per socket) where the kernel allows it (Linux
  /// 6.1, io_uring not refused), else with epoll. false: epoll always.
  bool io_uring = true;
  /// With io_uring on a kernel that stamps each read with its receive time (and a real clock):
  /// a wake-up waits up to this long for the other streams' tokens before reading, so that one
  /// wake-up reads many (Linux 6.12's min-wait; without it, every token wakes the generator).
  /// No token's time moves: each is timed by the kernel's receipt, not by the read. It delays
  /// only what the generator does next (the next request of a stream that ended). 0: a
  /// wake-up per ready socket, as with epoll.
  std::chrono::microseconds gather{1000};
};

/// What a run measured. Tokens are counted when they arrive within the measured time: a request
/// still streaming at the end adds the tokens it got so far and is then cancelled (not an
/// error). Tokens are counted from what arrived: a content chunk is a token, and a finished
/// request's usage.completion_tokens is believed only up to the bytes of text that arrived and
/// the request's max_tokens (see CountedTokens in load.cc). Nothing counts beyond max_tokens.
struct LoadFigures {
  int concurrency = 0;
  uint64_t requests = 0;       // finished with [DONE] within the measured time
  uint64_t errors = 0;         // failed: transport, HTTP status, malformed or broken stream
  uint64_t cancelled = 0;      // still streaming at the end
  uint64_t output_tokens = 0;  // within the measured time
  double seconds = 0;          // the measured time (the duration, or less when stopped)
  double output_tps = 0;       // output_tokens / seconds
  double ttft_p50_ms = 0, ttft_p90_ms = 0, ttft_p99_ms = 0;  // request start to first token
  double itl_p50_ms = 0, itl_p90_ms = 0, itl_p99_ms = 0;     // between a stream's tokens
  std::string first_error;  // the first failure, as the operator should read it; "" = none
  // The figures of `vllm bench serve`, with its definitions (FigureBuilder in figures.h says
  // each); percentiles interpolate between ranks, as numpy's do.
  double request_tps = 0;  // finished requests per second
  double ttft_mean_ms = 0;
  double itl_mean_ms = 0;
  double tpot_mean_ms = 0, tpot_p50_ms = 0, tpot_p90_ms = 0, tpot_p99_ms = 0;
  double e2e_mean_ms = 0, e2e_p50_ms = 0, e2e_p90_ms = 0, e2e_p99_ms = 0;
  double user_tps_mean = 0;      // 1000 / tpot_mean_ms: the output tok/s one request sees
  double user_tps_p50 = 0;       // 1000 / tpot_p50_ms
  bool has_goodput = false;      // limits were given (LoadSpec's goodput_*)
  uint64_t good_requests = 0;    // finished requests that met every limit given
  double goodput_rps = 0;        // good_requests per second
  uint64_t warmup_requests = 0;  // requests sent during the warm-up, in no figure
  // The server's own account (llama.cpp's timings on a stream's last chunk), beside berth's:
  // over the finished requests that carried it (server_requests of `requests`), the tokens the
  // server says it generated, its decode milliseconds (first token to last) summed, and the mean
  // of its per-request TPOT (FigureBuilder says each). 0 when the server gives none (vLLM).
  uint64_t server_requests = 0;
  uint64_t server_output_tokens = 0;
  double server_decode_ms = 0;
  double server_tpot_mean_ms = 0;
};

/// Keeps up to `spec.concurrency` streamed requests in flight for `spec.duration`, or until
/// `spec.num_prompts` have ended (or until `stop` becomes true), after the warm-up, and
/// measures them. Time comes from `clock` (null: the real clock); it must be
/// a real clock, as the server's answers take real time. An error only when nothing could be
/// measured (invalid spec, no epoll); failed requests are counted in the result, a host name
/// that does not resolve among them.
Result<LoadFigures> RunLoad(const LoadSpec& spec, const std::atomic<bool>* stop = nullptr,
                            Clock* clock = nullptr);

/// How an executor runs a load (RunLoad in production; tests give canned figures).
using LoadRunner =
    std::function<Result<LoadFigures>(const LoadSpec& spec, const std::atomic<bool>* stop)>;

}  // namespace berth
