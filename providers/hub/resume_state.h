// What of one blob is already on disk in blobs/<etag>.incomplete, so that a killed download
// fetches only what is missing: the chunk map beside a chunked file (which chunks are done), the
// bytes of each unfinished chunk the file system still holds (SEEK_HOLE), or for a file fetched
// in one stream the contiguous prefix (as huggingface_hub's own partial files are).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace berth {

enum class ChunkState : uint8_t { kPending, kInFlight, kDone };

struct ResumeState {
  uint64_t size = 0;   // of the blob
  uint64_t chunk = 0;  // chunk size; == size (at least 1) when fetched in one stream
  bool chunked = false;
  std::vector<ChunkState> chunks;
  /// Chunked files: bytes at the start of each pending chunk already written (a chunk cut
  /// short), to be fetched no more.
  std::vector<uint64_t> salvaged;
  /// One-stream files: the first byte still missing.
  uint64_t resume_at = 0;

  /// The first byte of chunk `i` and one past its last.
  uint64_t ChunkStart(size_t i) const { return i * chunk; }
  uint64_t ChunkEnd(size_t i) const;
  /// Bytes [0, watermark) are all written: the done chunks from the first on.
  uint64_t Watermark() const;
  /// Bytes on disk that need no fetching: done chunks, salvaged starts, a one-stream prefix.
  uint64_t ResumedBytes() const;
  bool AllDone() const;
  /// Every chunk back to pending and nothing salvaged (after the bytes proved wrong).
  void Restart();
};

/// The state of the blob of `size` bytes whose partial file is open as `fd`. `partial_size` is
/// the file's size before this run, `had_partial` whether it existed; `map_path` is the chunk
/// map. Files of at least `parallel_threshold` bytes are chunked in `chunk_bytes`, or in the
/// chunk size of the map an earlier run left (at least 1 MiB).
ResumeState LoadResumeState(int fd, bool had_partial, uint64_t partial_size, uint64_t size,
                            uint64_t parallel_threshold, uint64_t chunk_bytes,
                            const std::string& map_path);

/// Writes the chunk map of `s` (size, chunk size, the done chunks) to `path`, atomically. Not
/// fsynced: after a crash a lost entry only means one chunk fetched again. A map that cannot be
/// written (disk full) leaves the previous one, which is only ever behind.
void SaveChunkMap(const ResumeState& s, const std::string& path);

}  // namespace berth
