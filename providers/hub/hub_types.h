// What the Hub says of a repository at a commit, and how berth talks to it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace berth {

class Clock;

struct HubFileEntry {
  std::string path;  // "sub/model-00001-of-00005.safetensors"
  uint64_t size = 0;
  std::string git_oid;     // git blob sha1 (of the LFS pointer for LFS files)
  std::string lfs_sha256;  // sha256 of the content; "" for regular (git-stored) files
  bool is_lfs() const { return !lfs_sha256.empty(); }
  /// The blob's name in the cache: sha256 for LFS files, the git sha1 otherwise.
  const std::string& etag() const { return is_lfs() ? lfs_sha256 : git_oid; }
};

struct RepoSnapshot {
  std::string repo_id;
  std::string revision;             // as asked
  std::string commit;               // 40 hex
  std::vector<HubFileEntry> files;  // the whole tree at `commit`, files only, sorted by path
};

/// Progress of a pull, reported a few times a second.
struct PullProgress {
  std::string repo_id;
  uint64_t bytes_done = 0;     // verified or written, this run and before (resumed)
  uint64_t bytes_total = 0;    // of the files to fetch
  uint64_t bytes_fetched = 0;  // over the network in this run
  int files_done = 0;
  int files_total = 0;
  double seconds = 0;
};

struct HubOptions {
  /// HF_ENDPOINT or https://huggingface.co, without a trailing slash.
  std::string endpoint = "https://huggingface.co";
  /// Bearer token, sent only to `endpoint`'s host; "" for none. Never logged.
  std::string token;
  /// Connections open at once, across all files (default 32). A CDN caps each connection (about
  /// 40 MB/s on the Hub's), so connections, not one fast stream, make a download fast.
  int connections = 32;
  /// Files at least this big are fetched in ranged chunks over several connections.
  uint64_t parallel_threshold = 64ull << 20;
  /// The largest ranged chunk (default 32 MiB); the downloader picks smaller ones (down to
  /// 8 MiB) so that a file comes in a few rounds and its hash follows the download.
  uint64_t chunk_bytes = 32ull << 20;
  /// Attempts per request before giving up (transport errors, 408, 429, 5xx).
  int max_attempts = 8;
  /// First backoff; doubles up to max_backoff_ms, with jitter (Retry-After wins when longer).
  int backoff_ms = 500;
  int max_backoff_ms = 30000;
  long connect_timeout_s = 10;
  /// A transfer below 1 byte/s for this long is a stall: it is retried (no total timeout).
  long stall_timeout_s = 30;
  /// The time one HubHttp's retries of Hub API requests may wait in all (0, the default: no
  /// bound but max_attempts). Spent, the Hub counts as unreachable for the rest of that HubHttp's
  /// life, as after a failed name lookup or a refused connection. Plans set a few seconds, so a
  /// Hub answering 503 cannot hold a plan for minutes.
  long retry_budget_ms = 0;
  /// Time for backoffs, retry schedules and progress; null (the default) is RealClock().
  Clock* clock = nullptr;
  /// Set (by a signal handler) to stop a download between transfers; partial files stay.
  const std::atomic<bool>* cancel = nullptr;
  /// Called with progress a few times a second, on the downloading thread.
  std::function<void(const PullProgress&)> on_progress;
};

/// HF_ENDPOINT, HF_TOKEN / HUGGING_FACE_HUB_TOKEN / HF_TOKEN_PATH / $HF_HOME/token, as
/// huggingface_hub reads them (HF_HUB_DISABLE_IMPLICIT_TOKEN=1 sends none).
HubOptions HubOptionsFromEnvironment();

}  // namespace berth
