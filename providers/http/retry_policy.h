// The one retry policy of every HTTP request berth makes to the Hub and its CDN: how many
// attempts, how long to wait between them, and how the server's own Retry-After and RateLimit
// headers stretch the wait.
#pragma once

#include <string>

namespace berth {

struct RetryPolicy {
  /// Attempts in all, the first included (default 8). At least 1.
  int attempts = 8;
  /// Wait after the first failure (default 500 ms); doubles after each further failure.
  long first_backoff_ms = 500;
  /// The doubling stops here (default 30 s).
  long max_backoff_ms = 30000;
  /// Up to this fraction of the backoff is added at random (default 0.5), so that many
  /// clients (or many chunks of one download) do not retry in step.
  double jitter = 0.5;
  /// A server that asks for longer than this (Retry-After, RateLimit) is waited for this long
  /// (default 5 min, the Hub's rate-limit window), so a hostile header cannot stall berth.
  long max_server_wait_ms = 300000;

  /// True when attempt number `attempt` (1-based) failed and another one may follow.
  bool MayRetry(int attempt) const { return attempt < attempts; }
  /// The backoff after failed attempt `attempt` (1-based, values below 1 count as 1), without
  /// jitter: first_backoff_ms doubled attempt-1 times, at most max_backoff_ms. Never negative.
  long BackoffMs(int attempt) const;
  /// What to wait after failed attempt `attempt`: the backoff plus `unit_random` (in [0, 1))
  /// times its jitter, or the server's wait when longer. In [0, max(max_backoff_ms *
  /// (1 + jitter), max_server_wait_ms)].
  long DelayMs(int attempt, long server_wait_ms, double unit_random) const;
};

/// Milliseconds the server asked to wait, from `retry_after` (integer seconds; the HTTP-date
/// form is not read, as huggingface_hub does not) or `ratelimit` ("...;r=0;t=N": remaining 0,
/// reset in N seconds), the longer of the two; 0 when neither says.
long ServerWaitMs(const std::string& retry_after, const std::string& ratelimit);

}  // namespace berth
