// What past applies did: one entry per apply that carried out actions (by `berth apply` or a
// reconcile pass), the newest last, in <state dir>/history.json. `berth history` prints it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace berth {

struct HistoryEntry {
  std::string started;  // RFC 3339
  uint64_t duration_ms = 0;
  std::string manifest_digest;
  std::string manifest_git_commit;   // "" when the manifest is not in a git work tree
  std::string outcome;               // applied | failed | interrupted (OutcomeName)
  std::string message;               // why it failed, or "" when it succeeded
  std::vector<std::string> actions;  // "stop service/vllm-kimi-k25", in order, as planned
  int steps_done = 0;
  bool rolled_back = false;
  /// What its floor gates and their references measured, one line each: "floor
  /// vllm-minimax.service: 1180 output tok/s at concurrency 32 ..." (empty: none ran).
  std::vector<std::string> gates;
};

/// How many entries history.json keeps (the oldest go first).
inline constexpr size_t kHistoryKept = 200;

std::string HistoryToJson(const std::vector<HistoryEntry>& entries);
/// Validated like state.json: a damaged file is an error naming it, never a crash.
Result<std::vector<HistoryEntry>> HistoryFromJson(const std::string& text,
                                                  const std::string& source);

/// `dir`/history.json: read (empty when there is none yet) and appended to, atomically.
Result<std::vector<HistoryEntry>> ReadHistory(const std::string& dir);
Status AppendHistory(const std::string& dir, const HistoryEntry& entry);

/// The text `berth history` prints: one block per apply, newest first, at most `limit`.
std::string HistoryText(const std::vector<HistoryEntry>& entries, size_t limit);

}  // namespace berth
