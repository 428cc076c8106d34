// Operator logs (spdlog, to stderr, quiet by default): what berth is doing and why it waits —
// retries, lock waits, timings. User output (plans, progress) goes through the reporters, never
// here. Level from $BERTH_LOG_LEVEL (trace, debug, info, warn, error, off; default warn) or -v.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace berth {

/// Sets the level ("" = $BERTH_LOG_LEVEL, else warn) and the format; safe to call again.
void InitLogging(const std::string& level = "");

}  // namespace berth
