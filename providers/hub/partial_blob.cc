#include "providers/hub/partial_blob.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/read_file.h"

namespace berth {
namespace {

StreamHasher::Kind HashKind(const HubFileEntry& e) {
  return e.is_lfs() ? StreamHasher::Kind::kSha256 : StreamHasher::Kind::kGitSha1;
}

enum class Present {
  kNo,        // nothing there, or not a regular file of the blob's size: it is fetched
  kVerified,  // a regular file of the right size and hash
  kCorrupt,   // a regular file of the right size, of other bytes: it is replaced
};

/// Whether blobs/<etag> is there: a regular file (a symlink there is never taken for a blob: it
/// could point anywhere) of the blob's size whose hash is its name. Only then is it kept: a
/// same-size blob with a flipped byte is no blob of this name.
Present CheckPresent(const std::string& path, const HubFileEntry& e) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<uint64_t>(st.st_size) != e.size)
    return Present::kNo;
  uint64_t size = 0;
  Result<int> fd = OpenRegularFile(path, {.max_bytes = kMaxRepoFileBytes}, &size);
  if (!fd.ok() || size != e.size) {
    if (fd.ok()) ::close(*fd);
    return Present::kNo;
  }
  std::string error;
  std::string digest = HashFile(*fd, e.size, HashKind(e), &error);
  ::close(*fd);
  return error.empty() && digest == e.etag() ? Present::kVerified : Present::kCorrupt;
}

Status Errno(const std::string& what) {
  return Status::IoError(what + ": " + std::strerror(errno));
}

}  // namespace

Result<BlobOpen> OpenPartialBlob(const CacheLayout& layout, const HubFileEntry& e,
                                 uint64_t parallel_threshold, uint64_t chunk_bytes,
                                 PartialBlob* blob) {
  if (!(e.is_lfs() ? IsSha256Name(e.etag()) : IsGitSha1Name(e.etag())) ||
      e.size > kMaxRepoFileBytes)
    return Status::InvalidArgument(e.path + ": blob '" + e.etag().substr(0, 80) +
                                   "' is not a sha256 or git sha1, or its size is beyond 2^50");
  std::string final_path = layout.BlobPath(e.etag());
  if (CheckPresent(final_path, e) == Present::kVerified) return BlobOpen::kPresent;
  // The same lock huggingface_hub takes, so a concurrent Python download of this blob waits.
  std::string lock = layout.LockPath(e.etag());
  blob->lock_fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0664);
  if (blob->lock_fd < 0) return Errno("cannot open lock " + lock);
  if (::flock(blob->lock_fd, LOCK_EX) != 0) return Errno("cannot lock " + lock);
  // Checked again under the lock: someone else may have finished (or replaced) it meanwhile.
  switch (CheckPresent(final_path, e)) {
    case Present::kVerified:
      ClosePartialBlob(blob);
      return BlobOpen::kPresent;
    case Present::kCorrupt:
      // Wrong bytes under the blob's name (a flipped bit, a truncated copy padded back): they
      // go, and the blob is fetched again like a missing one.
      if (::unlink(final_path.c_str()) != 0) return Errno("cannot remove corrupt " + final_path);
      blob->replaced_corrupt = true;
      break;
    case Present::kNo:
      break;
  }
  std::string inc = layout.IncompletePath(e.etag());
  struct stat st;
  bool had_partial = ::lstat(inc.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  uint64_t partial_size = had_partial ? static_cast<uint64_t>(st.st_size) : 0;
  blob->fd = ::open(inc.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (blob->fd < 0) return Errno("cannot open " + inc);
  std::string map = layout.ChunkMapPath(e.etag());
  blob->state = LoadResumeState(blob->fd, had_partial, partial_size, e.size, parallel_threshold,
                                chunk_bytes, map);
  const ResumeState& s = blob->state;
  if (s.chunked) {
    SaveChunkMap(s, map);  // exists before the first write: its absence means "not ours"
    // Chunks land anywhere in a chunked file; a one-stream file stays a contiguous prefix, as
    // huggingface_hub's own partial files are.
    if (::ftruncate(blob->fd, static_cast<off_t>(e.size)) != 0) return Errno("cannot size " + inc);
  } else if (partial_size > e.size && ::ftruncate(blob->fd, 0) != 0) {
    return Errno("cannot truncate " + inc);
  }
  blob->hasher = std::make_unique<StreamHasher>(blob->fd, e.size, HashKind(e), e.etag());
  blob->hasher->Advance(std::max(s.Watermark(), s.chunked ? 0 : s.resume_at));
  return BlobOpen::kOpened;
}

void ClosePartialBlob(PartialBlob* blob) {
  blob->hasher.reset();
  if (blob->fd >= 0) ::close(blob->fd);
  blob->fd = -1;
  if (blob->lock_fd >= 0) ::close(blob->lock_fd);  // releases the flock
  blob->lock_fd = -1;
}

Result<BlobVerdict> PublishPartialBlob(const CacheLayout& layout, const HubFileEntry& e,
                                       const std::string& repo, PartialBlob* blob) {
  std::string error;
  std::string digest = blob->hasher->Finish(&error);
  std::string inc = layout.IncompletePath(e.etag());
  if (!error.empty()) return Status::IoError("cannot read back " + inc + ": " + error);
  if (digest != e.etag()) {
    // Wrong bytes (a bad mirror, a corrupt CDN object, a torn partial): discard, try once more.
    blob->hasher.reset();
    if (::ftruncate(blob->fd, 0) != 0 ||
        (blob->state.chunked && ::ftruncate(blob->fd, static_cast<off_t>(e.size)) != 0))
      return Errno("cannot truncate " + inc);
    ::unlink(layout.ChunkMapPath(e.etag()).c_str());
    if (++blob->verify_failures > 1)
      return Status::Unavailable(
          e.path + " of " + repo + " failed verification twice (expected " +
          (e.is_lfs() ? "sha256 " : "git sha1 ") + e.etag() + ", got " + digest +
          "): the server sends wrong bytes; the partial was discarded. Check HF_ENDPOINT or "
          "any proxy in between");
    blob->state.Restart();
    if (blob->state.chunked) SaveChunkMap(blob->state, layout.ChunkMapPath(e.etag()));
    blob->hasher = std::make_unique<StreamHasher>(blob->fd, e.size, HashKind(e), e.etag());
    return BlobVerdict::kRefetch;
  }
  // The hasher already fdatasync'ed the verified bytes, off the downloading thread.
  ::fchmod(blob->fd, 0644);
  if (::rename(inc.c_str(), layout.BlobPath(e.etag()).c_str()) != 0)
    return Errno("cannot rename " + inc);
  ::unlink(layout.ChunkMapPath(e.etag()).c_str());
  ClosePartialBlob(blob);
  return BlobVerdict::kPublished;
}

}  // namespace berth
