#include "providers/http/retry_policy.h"

#include <algorithm>
#include <cctype>

namespace berth {
namespace {

/// A run of decimal digits at `s`, as seconds in milliseconds; -1 when there is none. Values
/// past a day are cut to a day (overflow-safe).
long SecondsAt(const std::string& s, size_t pos) {
  constexpr long kDayS = 86400;
  long v = 0;
  size_t i = pos;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i)
    v = std::min(kDayS, v * 10 + (s[i] - '0'));
  return i == pos ? -1 : v * 1000;
}

}  // namespace

long RetryPolicy::BackoffMs(int attempt) const {
  long cap = std::max(0L, max_backoff_ms);
  long b = std::clamp(first_backoff_ms, 0L, cap);
  for (int i = 1; i < attempt && b < cap; ++i) b = std::min(cap, b * 2);
  return b;
}

long RetryPolicy::DelayMs(int attempt, long server_wait_ms, double unit_random) const {
  long b = BackoffMs(attempt);
  double u = std::clamp(unit_random, 0.0, 1.0);
  long extra = static_cast<long>(static_cast<double>(b) * std::clamp(jitter, 0.0, 1.0) * u);
  long server = std::clamp(server_wait_ms, 0L, std::max(0L, max_server_wait_ms));
  return std::max(b + extra, server);
}

long ServerWaitMs(const std::string& retry_after, const std::string& ratelimit) {
  long ms = 0;
  if (SecondsAt(retry_after, 0) >= 0 &&
      retry_after.find_first_not_of("0123456789") == std::string::npos)
    ms = SecondsAt(retry_after, 0);
  size_t r = ratelimit.find(";r=");
  size_t t = ratelimit.find(";t=");
  if (r != std::string::npos && t != std::string::npos && SecondsAt(ratelimit, r + 3) == 0)
    ms = std::max(ms, SecondsAt(ratelimit, t + 3));
  return ms;
}

}  // namespace berth
