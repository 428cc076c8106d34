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
  double duration_s = 0;  // per level
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
