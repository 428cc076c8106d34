// The one way berth reads a file: the state directory's files, the store's metadata, saved
// plans, berth.lock, unit files read back, /proc. Whatever is at the path, the read ends: a
// FIFO or a device is refused without blocking (opened O_NONBLOCK, checked with fstat before
// any read), a file over its bound is refused before it sizes a buffer, and where berth writes
// itself a symbolic link is refused instead of followed (O_NOFOLLOW), so a link planted there
// cannot make berth read (or a later rename-over write reveal) what it points at.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace berth {

struct FileReadOptions {
  /// Refuse a file larger than this (by its size, and by what a read returns for files such as
  /// /proc's that report none). Default 16 MiB.
  uint64_t max_bytes = uint64_t{16} << 20;
  /// Follow a final symbolic link. Default false: for files in folders berth writes (state dir,
  /// store metadata, unit directory). True for paths an operator names (--observed, a password
  /// file), which are often links (a Kubernetes secret, a checkout), and for snapshot files,
  /// which are links into blobs/ by design.
  bool follow_links = false;
};

/// The whole content of the regular file at `path`. NotFound when nothing is there (a dangling
/// link followed included); InvalidArgument, naming the file and what it is, for a symbolic link
/// (unless followed), a FIFO, a socket, a device, a folder, or a file over `max_bytes`;
/// PermissionDenied or IoError with errno's text otherwise. Never blocks on what it opens.
Result<std::string> ReadRegularFile(const std::string& path, const FileReadOptions& options = {});

/// The same checks, for a file read in pieces (a blob to hash): the open fd (O_CLOEXEC, blocking
/// again; the caller closes it), and its size in `size` when given.
Result<int> OpenRegularFile(const std::string& path, const FileReadOptions& options,
                            uint64_t* size = nullptr);

/// Opens (creating it 0644) the regular file at `path` for a lock held with flock: never
/// through a symbolic link, never a FIFO or a device. The fd (O_CLOEXEC, blocking again), or a
/// Status as ReadRegularFile's that names the file and says to remove what is there.
Result<int> OpenLockFile(const std::string& path);

}  // namespace berth
