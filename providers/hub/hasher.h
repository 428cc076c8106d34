// Hashes a file as its written prefix grows: the downloader raises the watermark as chunks
// land, a worker thread hashes from the page cache up to it. sha256 for LFS blobs, the git blob
// sha1 ("blob <size>\0" + content) for regular files.
//
// A file berth downloads (under its flock) is read through small read-only mappings, which
// saves the copy a pread makes (about 0.5 CPU s per GiB here); each hashed window is then handed
// to the disk (sync_file_range), so the final fdatasync has little left to write. Other files
// (verify) are read with pread: a mapping of a file someone else truncates would fault.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace berth {

class StreamHasher {
 public:
  enum class Kind { kSha256, kGitSha1 };
  /// Hashes `fd` (not owned; must stay open until Finish) of `size` bytes. When `sync_if` is
  /// set, the file is berth's own download: it is read through mappings, written back as it is
  /// hashed, and when the digest equals `sync_if` the worker fdatasyncs it before it reports
  /// done, so the caller's thread never waits on the disk.
  StreamHasher(int fd, uint64_t size, Kind kind, std::string sync_if = "");
  ~StreamHasher();
  StreamHasher(const StreamHasher&) = delete;
  StreamHasher& operator=(const StreamHasher&) = delete;

  /// Bytes [0, watermark) are written: hash up to there.
  void Advance(uint64_t watermark);
  /// True once every byte is hashed (or reading failed).
  bool done() const;
  /// The hex digest, or "" with `error` set when a read failed. Blocks until done.
  std::string Finish(std::string* error);

 private:
  void Run();
  /// Hashes [from, to) into `ctx` (an EVP_MD_CTX*); "" or what went wrong.
  std::string Hash(void* ctx, uint64_t from, uint64_t to);
  int fd_;
  uint64_t size_;
  Kind kind_;
  std::string sync_if_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t watermark_ = 0;
  uint64_t hashed_ = 0;
  bool stop_ = false;
  bool finished_ = false;
  std::string digest_, error_;
  std::thread thread_;
};

/// The digest of the first `size` bytes of `fd` (not owned), read with pread: a file berth
/// did not just write (verify, a blob already in the store). "" with `error` set when a read
/// failed or the file is shorter.
std::string HashFile(int fd, uint64_t size, StreamHasher::Kind kind, std::string* error);

}  // namespace berth
