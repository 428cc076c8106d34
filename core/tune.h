// berth tune (issue 40): a service's candidate configurations tried on the host itself, each as
// an ordinary switch through the gates, measured with berth bench's load, the best kept as a
// manifest change. These are the values the tune file (manifests/tune_file.h), the sweep
// (engine/tune/) and its report (engine/output/tune_report.h) share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/desired.h"

namespace berth {

/// One setting of a candidate: a dotted key path inside the service's manifest entry and the
/// value, as YAML flow text ("vllm.tensor_parallel_size" = "8", "gpus" = "[0, 1, 2, 3]",
/// "llama_server.threads" = "2", "vllm.speculative" = "{method: mtp, num_speculative_tokens: 1}").
struct TuneSetting {
  std::string path;
  std::string value;
  friend bool operator==(const TuneSetting&, const TuneSetting&) = default;
};

/// One configuration to try: the service as declared with `settings` set on it. The baseline
/// (the configuration the manifest declares) has no settings.
struct TuneCandidate {
  std::string name;  // given in the tune file, or made from the settings ("threads=2 parallel=4")
  std::vector<TuneSetting> settings;
  SourceLoc loc;  // where the tune file wrote it (a product of axes: the axes' place)
  friend bool operator==(const TuneCandidate&, const TuneCandidate&) = default;
};

/// The load each candidate is measured at: berth bench's terms (`berth bench --concurrency N
/// --num-prompts N ...`), one level.
struct TuneLoad {
  int concurrency = 1;           // streams
  uint64_t num_prompts = 0;      // requests to measure; 0: for duration_ms instead
  uint64_t duration_ms = 0;      // used when num_prompts is 0 (default 30 s)
  double request_rate = 0;       // Poisson arrivals per second; 0: none (each stream at once)
  uint64_t seed = 0;             // of the arrival times
  int prompt_tokens = 128;       // words of the made-up prompt
  int max_tokens = 256;          // per request
  uint64_t warmup_requests = 0;  // sent first, not counted
  bool chat = false;             // /v1/chat/completions instead of /v1/completions
  friend bool operator==(const TuneLoad&, const TuneLoad&) = default;
};

/// What "best" means: the highest `maximize` among the candidates whose p99s meet every limit
/// set (0: not checked). kGoodput is requests per second that meet the limits (`vllm bench
/// serve --goodput`), with the limits as its thresholds.
struct TuneObjective {
  enum class Metric { kOutputTokensPerSecond, kGoodput };
  Metric maximize = Metric::kOutputTokensPerSecond;
  double ttft_p99_ms = 0;
  double tpot_p99_ms = 0;
  double e2e_p99_ms = 0;
  friend bool operator==(const TuneObjective&, const TuneObjective&) = default;
};

/// A tune file, validated.
struct TuneSpec {
  std::string file;      // the tune file's path
  std::string service;   // the one service tried
  bool baseline = true;  // measure the declared configuration first, as candidate "declared"
  std::vector<TuneCandidate> candidates;  // in the order they run, the baseline not included
  TuneLoad load;
  TuneObjective objective;
  friend bool operator==(const TuneSpec&, const TuneSpec&) = default;
};

/// The figures of one candidate under the load (providers/bench's LoadFigures, the ones the
/// report shows).
struct TuneFigures {
  uint64_t requests = 0, errors = 0, output_tokens = 0;
  double seconds = 0;
  double output_tps = 0, request_tps = 0, goodput_rps = 0;
  double ttft_p50_ms = 0, ttft_p99_ms = 0;
  double tpot_p50_ms = 0, tpot_p99_ms = 0;
  double itl_p50_ms = 0, itl_p99_ms = 0;
  double e2e_p50_ms = 0, e2e_p99_ms = 0;
  std::string first_error;
  friend bool operator==(const TuneFigures&, const TuneFigures&) = default;
};

/// What happened to one candidate.
struct TuneOutcome {
  enum class Verdict {
    kMeasured,    // switched to, gates passed, measured
    kInfeasible,  // refused before anything stopped (plan blocked, engine check refused)
    kFailed,      // its switch or a gate failed; the host went back (its undo)
    kNotRun,      // the sweep stopped before it (Ctrl-C, an error)
  };
  TuneCandidate candidate;
  Verdict verdict = Verdict::kNotRun;
  std::string why;  // infeasible / failed: what refused or failed, in the gate's own words
  /// The plan's switch: "make-before-break", "stop-first", "restart", "none" (already running);
  /// with the dark window it planned (expected and worst, ms; 0 when nothing goes dark).
  std::string switch_mode;
  uint64_t dark_expected_ms = 0, dark_worst_ms = 0;
  uint64_t switch_ms = 0;              // how long its apply took, measured
  std::vector<std::string> gates;      // the gates it passed, one line each ("health 3.2 s")
  std::optional<TuneFigures> figures;  // measured candidates
  bool meets_limits = false;           // every limit of the objective met
  std::string missed;                  // the limits it missed ("TTFT p99 812 ms > 500 ms")
  bool resumed = false;                // figures from an earlier run (--resume), not measured now
  friend bool operator==(const TuneOutcome&, const TuneOutcome&) = default;
};

/// The whole sweep: what the report, the plot and the patch are made from.
struct TuneReport {
  TuneSpec spec;
  std::string manifest_path;          // -f
  std::string declaring_file;         // the manifest file that declares the service
  std::string model, commit;          // what the service serves
  std::string started;                // RFC 3339
  std::vector<TuneOutcome> outcomes;  // baseline first, then each candidate in order
  std::optional<size_t> winner;       // index into outcomes
  /// The winner as a change of declaring_file (a unified diff); "" when the winner is the
  /// declared configuration or there is none.
  std::string patch;
  /// What the host runs now: "declared" or "winner" (--keep-winner), or why neither.
  std::string ended_on;
  friend bool operator==(const TuneReport&, const TuneReport&) = default;
};

}  // namespace berth
