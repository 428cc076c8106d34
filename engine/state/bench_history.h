// berth bench's results, kept in the state directory (bench.json) so that models measured on
// this host can be compared later, the way an operator compares the model they switch to with
// the one they keep. Written atomically under its own lock (a bench does not wait for an apply),
// validated on read, bounded: the newest kBenchRecordsKept records are kept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace berth {

/// One concurrency level of a run (LoadFigures, as stored).
struct BenchLevel {
  int concurrency = 0;
  uint64_t requests = 0;
  uint64_t errors = 0;
  uint64_t output_tokens = 0;
  double seconds = 0;
  double output_tps = 0;
  double ttft_p50_ms = 0, ttft_p90_ms = 0, ttft_p99_ms = 0;
  double itl_p50_ms = 0, itl_p90_ms = 0, itl_p99_ms = 0;
  std::string first_error;
  // The figures of `vllm bench serve` (LoadFigures says each); has_request_figures is false in
  // records written before berth measured them, which then show "-" for them.
  bool has_request_figures = false;
  uint64_t cancelled = 0;        // still streaming at the end of the measured time
  uint64_t warmup_requests = 0;  // ran before measuring, in no figure
  double request_tps = 0;
  double ttft_mean_ms = 0, itl_mean_ms = 0;
  double tpot_mean_ms = 0, tpot_p50_ms = 0, tpot_p90_ms = 0, tpot_p99_ms = 0;
  double e2e_mean_ms = 0, e2e_p50_ms = 0, e2e_p90_ms = 0, e2e_p99_ms = 0;
  double user_tps_mean = 0, user_tps_p50 = 0;
  bool has_goodput = false;  // goodput limits were given
  uint64_t good_requests = 0;
  double goodput_rps = 0;
  // The server's own account (LoadFigures' server_*): over server_requests finished requests
  // (0: the server gave none), its tokens, decode milliseconds summed and mean TPOT.
  uint64_t server_requests = 0;
  uint64_t server_output_tokens = 0;
  double server_decode_ms = 0;
  double server_tpot_mean_ms = 0;
};

/// One `berth bench` run of a service: what ran (service, model repo, commit) and its levels.
struct BenchRecord {
  std::string time;         // RFC 3339 UTC, when the run started
  std::string service;      // "vllm-minimax-m25"
  std::string served_name;  // the model name requests asked for
  std::string model;        // the manifest's model name, "" for a command without one
  std::string repo_id;      // "MiniMaxAI/MiniMax-M2.5"
  std::string commit;       // 40 hex; "" when berth could not tell
  std::string engine;       // vllm | sglang | llama-server | command
  bool chat = false;
  int prompt_tokens = 0;
  int max_tokens = 0;
  double duration_s = 0;     // per level (not used with num_prompts)
  uint64_t num_prompts = 0;  // requests per level; 0: a closed loop for duration_s
  double request_rate = 0;   // requests per second (Poisson); 0: as fast as concurrency allows
  uint64_t seed = 0;         // of the arrival times
  std::string warmup;        // as given: "" none, "10" requests, "5s" a duration
  double goodput_ttft_ms = 0, goodput_tpot_ms = 0, goodput_e2e_ms = 0;  // 0: not given
  std::vector<BenchLevel> levels;

  /// What the comparison groups by: service, repo and commit.
  std::string Key() const { return service + "|" + repo_id + "|" + commit; }
};

inline constexpr size_t kBenchRecordsKept = 200;

std::string BenchRecordsToJson(const std::vector<BenchRecord>& records);
/// Every problem makes it an error naming `source`: a damaged file is not silently dropped.
Result<std::vector<BenchRecord>> BenchRecordsFromJson(const std::string& text,
                                                      const std::string& source);
std::string BenchRecordToJson(const BenchRecord& r);  // one record, as `-o json` prints it

/// bench.json in a state directory.
class BenchHistory {
 public:
  explicit BenchHistory(std::string state_dir) : dir_(std::move(state_dir)) {}
  std::string path() const { return dir_ + "/bench.json"; }
  /// Oldest first; empty when there is no file yet.
  Result<std::vector<BenchRecord>> Load() const;
  /// Adds `record` (under bench.lock, so two benches do not lose each other's), dropping the
  /// oldest beyond kBenchRecordsKept.
  Status Append(const BenchRecord& record) const;

 private:
  std::string dir_;
};

/// The newest record of each key (service, repo, commit), oldest first; only those of
/// `services` when it is not empty.
std::vector<BenchRecord> LatestPerKey(const std::vector<BenchRecord>& records,
                                      const std::vector<std::string>& services);

}  // namespace berth
