// Host memory and the page cache, for fast switches (a model server's start reads its weights:
// from the page cache that is seconds, from a cold disk several times that):
// - what the kernel says is available (/proc/meminfo's MemAvailable);
// - how much of a model's files the page cache holds (mmap, then mincore);
// - reading files into it ahead of a start (posix_fadvise WILLNEED, then reads in bounded
//   chunks, stoppable, with progress), and dropping them from it (POSIX_FADV_DONTNEED: a cold
//   start for benchmarks).
// Everything read from /proc is untrusted: bounded, checked, never thrown.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace berth {

struct MemInfo {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;  // MemAvailable: what can be had without swapping
};

/// MemTotal and MemAvailable of `text` (the format of /proc/meminfo: "MemAvailable:  123 kB").
/// InvalidArgument naming `where` and the line for a missing field, a value that is not a
/// number of kB or overflows, or a text over 64 KiB.
Result<MemInfo> ParseMemInfo(std::string_view text, const std::string& where);
/// ParseMemInfo of the file at `path` (at most 64 KiB of it).
Result<MemInfo> ReadMemInfo(const std::string& path = "/proc/meminfo");

struct Residency {
  size_t files = 0;
  uint64_t bytes = 0;           // their sizes, added
  uint64_t resident_bytes = 0;  // what the page cache holds of them (whole pages, capped at size)
};

/// How much of `files` the page cache holds now (each mapped read-only and asked with mincore;
/// nothing is read). Links are followed; a path that is not a regular file, or cannot be
/// opened, is an error naming it.
Result<Residency> PageCacheResidency(const std::vector<std::string>& files);

struct PrewarmOptions {
  size_t chunk_bytes = 8u << 20;  // one read
  /// Checked between chunks: the prewarm ends early (Ok) with what it read so far.
  const std::atomic<bool>* stop = nullptr;
  /// After each chunk: bytes read so far of `total`.
  std::function<void(uint64_t done, uint64_t total)> progress;
  /// When the prewarm gives up, checked between chunks like `stop` (Ok, with what it read):
  /// a read ahead is never worth holding the switch for long. Default: no bound.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

/// Reads `files` into the page cache: posix_fadvise(WILLNEED) on each (the kernel starts
/// reading ahead), then reads each through in chunks into one reused buffer, at most the size it
/// had when opened (a file that grows is not followed). Regular files only (OpenRegularFile).
/// Returns the bytes read. Errors name the file.
Result<uint64_t> Prewarm(const std::vector<std::string>& files, const PrewarmOptions& options = {});

/// The weight files a vLLM-style server reads at start: every *.safetensors file under the
/// snapshot folder `snapshot` (links followed, as the store's snapshots are links into blobs;
/// at most 4 folders deep and 100,000 entries), in name order. Only regular files inside the
/// snapshot's repository folder (snapshot/../..: its blobs and snapshots) are named: a link
/// that leads out of it (/proc/kmsg, /etc/shadow) is not part of the model and is skipped.
/// NotFound when the folder is not there; an error names what could not be read.
Result<std::vector<std::string>> SafetensorsFiles(const std::string& snapshot);

/// What a prewarm of `snapshot` reads: its SafetensorsFiles when `file` is "", else the one
/// file `file` (a path inside the snapshot: llama-server's GGUF), under the same rule: a
/// regular file inside the snapshot's repository folder once links are followed. NotFound when
/// the folder or the file is not there, or the file leads out of the repository.
Result<std::vector<std::string>> PrewarmFiles(const std::string& snapshot, const std::string& file);

/// Asks the kernel to drop `files` from the page cache (POSIX_FADV_DONTNEED). Pages that are
/// dirty or mapped stay, and tmpfs keeps everything: check with PageCacheResidency.
Status Evict(const std::vector<std::string>& files);

}  // namespace berth
