// One blob on its way into the store: the flock huggingface_hub takes too, the partial file
// blobs/<etag>.incomplete with what of it is already there (ResumeState), its running hash, and
// the rename to blobs/<etag> once every byte is verified and on disk.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "providers/hub/cache_layout.h"
#include "providers/hub/hasher.h"
#include "providers/hub/resume_state.h"

namespace berth {

struct PartialBlob {
  int fd = -1;       // the partial file
  int lock_fd = -1;  // holds the flock
  ResumeState state;
  std::unique_ptr<StreamHasher> hasher;
  int verify_failures = 0;
  /// blobs/<etag> was there with the right size and other bytes: removed, to be fetched again.
  bool replaced_corrupt = false;
};

enum class BlobOpen {
  kPresent,  // blobs/<etag> is complete and its hash verified (maybe finished by another process)
  kOpened,   // `blob` is locked and open, its state and hasher set up
};

/// Locks blob `e` of `layout` and opens its partial file, resuming what is there. Files of at
/// least `parallel_threshold` bytes are chunked in `chunk_bytes`. A blob already there is
/// re-hashed: kept when it verifies, else removed (`replaced_corrupt`) and fetched again.
Result<BlobOpen> OpenPartialBlob(const CacheLayout& layout, const HubFileEntry& e,
                                 uint64_t parallel_threshold, uint64_t chunk_bytes,
                                 PartialBlob* blob);

/// Closes the file and releases the lock (the partial file stays).
void ClosePartialBlob(PartialBlob* blob);

enum class BlobVerdict {
  kPublished,  // renamed to blobs/<etag>, fdatasync'ed before; the blob is closed
  kRefetch,    // wrong bytes: the partial is emptied and the hash restarted, fetch it all again
};

/// Waits for the hash of `blob` (every byte written) and publishes it when it matches. Wrong
/// bytes once give kRefetch; twice, an error that says the server sends wrong bytes. `repo`
/// names the repo in messages.
Result<BlobVerdict> PublishPartialBlob(const CacheLayout& layout, const HubFileEntry& e,
                                       const std::string& repo, PartialBlob* blob);

}  // namespace berth
