// berth bench's output: a run's table, and the comparison of models side by side (one column
// per service, model repo and commit; a row per figure and concurrency).
#pragma once

#include <string>
#include <vector>

#include "engine/state/bench_history.h"

namespace berth {

/// "vllm-minimax-m25: MiniMaxAI/MiniMax-M2.5@0123abc (served as minimax) ..." and the
/// settings, two lines.
std::string BenchHeaderText(const BenchRecord& r, const std::string& endpoint);
/// One line per concurrency level: requests, errors, output tok/s, TTFT and ITL percentiles;
/// then, for runs that measured them, a line per level of the per-request figures (req/s, TPOT
/// and E2E percentiles, tok/s per user at the median TPOT, goodput when limits were given);
/// then the first error of each level that had one.
std::string BenchLevelsText(const BenchRecord& r);
/// The comparison: a column per record (oldest first), rows for each concurrency any of them
/// measured: output tok/s, TTFT p50 and p99, ITL p50 and p99, req/s, TPOT and E2E p50 and p99
/// ("-" where one did not measure it).
std::string BenchCompareText(const std::vector<BenchRecord>& columns);
/// {"columns": [record, ...]} with each record as stored.
std::string BenchCompareJson(const std::vector<BenchRecord>& columns);

/// "12.3 ms", "250 ms", "1.25 s".
std::string FormatLatencyMs(double ms);
/// "84.1", "2541".
std::string FormatTps(double tps);
/// Rounded to a whole number, thousands apart: "4,012", "950", "1,000,000".
std::string FormatGrouped(double v);

}  // namespace berth
