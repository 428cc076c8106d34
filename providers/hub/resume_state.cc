#include "providers/hub/resume_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <sstream>

#include "core/read_file.h"

namespace berth {

uint64_t ResumeState::ChunkEnd(size_t i) const { return std::min<uint64_t>(size, (i + 1) * chunk); }

uint64_t ResumeState::Watermark() const {
  uint64_t w = 0;
  for (size_t i = 0; i < chunks.size() && chunks[i] == ChunkState::kDone; ++i) w = ChunkEnd(i);
  return w;
}

uint64_t ResumeState::ResumedBytes() const {
  if (!chunked) return AllDone() ? size : resume_at;
  uint64_t n = 0;
  for (size_t i = 0; i < chunks.size(); ++i)
    n += chunks[i] == ChunkState::kDone ? ChunkEnd(i) - ChunkStart(i) : salvaged[i];
  return n;
}

bool ResumeState::AllDone() const {
  return !chunks.empty() && std::all_of(chunks.begin(), chunks.end(),
                                        [](ChunkState c) { return c == ChunkState::kDone; });
}

void ResumeState::Restart() {
  std::fill(chunks.begin(), chunks.end(), ChunkState::kPending);
  std::fill(salvaged.begin(), salvaged.end(), 0);
  resume_at = 0;
}

namespace {

constexpr uint64_t kMinMapChunk = 1 << 20;

/// Chunked files: a chunk cut short (kill -9 mid-transfer) was written from its start on, and
/// the file system knows where its data ends (SEEK_HOLE). Keeps that much, less the last block,
/// which may be half written.
void SalvageCutChunks(int fd, ResumeState* s) {
  struct stat st;
  uint64_t block =
      ::fstat(fd, &st) == 0 && st.st_blksize > 0 ? static_cast<uint64_t>(st.st_blksize) : 4096;
  for (size_t i = 0; i < s->chunks.size(); ++i) {
    if (s->chunks[i] == ChunkState::kDone) continue;
    uint64_t start = s->ChunkStart(i), end = s->ChunkEnd(i);
    off_t data = ::lseek(fd, static_cast<off_t>(start), SEEK_DATA);
    if (data < 0 || static_cast<uint64_t>(data) != start) continue;
    off_t hole = ::lseek(fd, static_cast<off_t>(start), SEEK_HOLE);
    if (hole < 0) continue;
    uint64_t written = std::min<uint64_t>(static_cast<uint64_t>(hole), end) - start;
    written = written / block * block;
    if (written >= block) written -= block;
    s->salvaged[i] = written;
  }
}

}  // namespace

ResumeState LoadResumeState(int fd, bool had_partial, uint64_t partial_size, uint64_t size,
                            uint64_t parallel_threshold, uint64_t chunk_bytes,
                            const std::string& map_path) {
  ResumeState s;
  s.size = size;
  s.chunked = size >= parallel_threshold && chunk_bytes > 0;
  s.chunk = s.chunked ? chunk_bytes : std::max<uint64_t>(size, 1);
  size_t n = static_cast<size_t>(size == 0 ? 0 : (size + s.chunk - 1) / s.chunk);
  s.chunks.assign(n, ChunkState::kPending);
  s.salvaged.assign(n, 0);
  if (!had_partial) return s;
  // berth's own map, beside the partial: never read through a link, nor past a bound (a map
  // lists at most a few million chunk numbers).
  Result<std::string> map_text = ReadRegularFile(map_path, {.max_bytes = uint64_t{64} << 20});
  std::istringstream map(map_text.ok() ? *map_text : std::string());
  uint64_t map_size = 0, map_chunk = 0;
  // The map's own chunk size wins (an earlier run with other options picked another one), if
  // it makes sense: at least kMinMapChunk, so a corrupt map cannot ask for billions of chunks.
  if (s.chunked && map >> map_size >> map_chunk && map_size == size && map_chunk >= kMinMapChunk &&
      map_chunk <= size) {
    s.chunk = map_chunk;
    n = static_cast<size_t>((size + s.chunk - 1) / s.chunk);
    s.chunks.assign(n, ChunkState::kPending);
    s.salvaged.assign(n, 0);
    size_t idx;
    while (map >> idx)
      if (idx < n) s.chunks[idx] = ChunkState::kDone;
  } else {
    // No map of ours: a contiguous prefix (huggingface_hub 0.36 appends). Where the data really
    // ends is the first hole: a sparse file is never taken for data.
    off_t hole = ::lseek(fd, 0, SEEK_HOLE);
    if (hole >= 0) partial_size = std::min<uint64_t>(partial_size, static_cast<uint64_t>(hole));
    if (!s.chunked) {
      if (partial_size == size && n == 1) s.chunks[0] = ChunkState::kDone;  // not yet renamed
      if (partial_size < size) s.resume_at = partial_size;  // longer than the blob: start over
      return s;
    }
    for (size_t i = 0; i < n && s.ChunkEnd(i) <= partial_size; ++i) s.chunks[i] = ChunkState::kDone;
  }
  SalvageCutChunks(fd, &s);
  return s;
}

void SaveChunkMap(const ResumeState& s, const std::string& path) {
  std::ostringstream out;
  out << s.size << " " << s.chunk << "\n";
  for (size_t i = 0; i < s.chunks.size(); ++i)
    if (s.chunks[i] == ChunkState::kDone) out << i << "\n";
  std::string tmp = path + ".tmp";
  std::remove(tmp.c_str());  // a link left there is replaced, never written through
  // A new file (O_EXCL: not one planted at the name since), renamed over the map. No fsync:
  // a map lost in a crash only makes the next run fetch its chunks again.
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  const std::string text = out.str();
  for (size_t done = 0; ok && done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  if (fd >= 0 && ::close(fd) != 0) ok = false;
  if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) std::remove(tmp.c_str());
}

}  // namespace berth
