#include "providers/hub/hasher.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace berth {
namespace {

/// Bytes mapped (or read) at a time: small, as mapped pages count in the resident set.
constexpr uint64_t kWindow = 8ull << 20;

}  // namespace

StreamHasher::StreamHasher(int fd, uint64_t size, Kind kind, std::string sync_if)
    : fd_(fd), size_(size), kind_(kind), sync_if_(std::move(sync_if)) {
  thread_ = std::thread([this] { Run(); });
}

StreamHasher::~StreamHasher() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StreamHasher::Advance(uint64_t watermark) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (watermark > watermark_) watermark_ = std::min(watermark, size_);
  }
  cv_.notify_all();
}

bool StreamHasher::done() const {
  std::lock_guard<std::mutex> l(mu_);
  return finished_;
}

std::string StreamHasher::Finish(std::string* error) {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return finished_; });
  if (error) *error = error_;
  return digest_;
}

std::string StreamHasher::Hash(void* ctx_ptr, uint64_t from, uint64_t to) {
  auto* ctx = static_cast<EVP_MD_CTX*>(ctx_ptr);
  static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> buf;
  for (uint64_t pos = from; pos < to;) {
    uint64_t len = std::min(kWindow, to - pos);
    if (!sync_if_.empty()) {
      uint64_t base = pos / page * page;
      size_t map_len = static_cast<size_t>(pos + len - base);
      void* m = ::mmap(nullptr, map_len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd_,
                       static_cast<off_t>(base));
      if (m == MAP_FAILED) return std::string("mmap: ") + std::strerror(errno);
      EVP_DigestUpdate(ctx, static_cast<unsigned char*>(m) + (pos - base), len);
      ::munmap(m, map_len);
      // Hand the hashed bytes to the disk now, not all at the final fdatasync.
      ::sync_file_range(fd_, static_cast<off64_t>(pos), static_cast<off64_t>(len),
                        SYNC_FILE_RANGE_WRITE);
      pos += len;
      continue;
    }
    buf.resize(kWindow);
    ssize_t n = ::pread(fd_, buf.data(), static_cast<size_t>(len), static_cast<off_t>(pos));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::strerror(errno);
    if (n == 0) return "file shorter than its written size";
    EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(n));
    pos += static_cast<uint64_t>(n);
  }
  return "";
}

void StreamHasher::Run() {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, kind_ == Kind::kSha256 ? EVP_sha256() : EVP_sha1(), nullptr);
  if (kind_ == Kind::kGitSha1) {
    std::string head = "blob " + std::to_string(size_) + std::string(1, '\0');
    EVP_DigestUpdate(ctx, head.data(), head.size());
  }
  std::string error;
  for (;;) {
    uint64_t target;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || watermark_ > hashed_ || hashed_ >= size_; });
      if (hashed_ >= size_ || stop_) break;
      target = watermark_;
    }
    uint64_t pos = hashed_;
    error = Hash(ctx, pos, target);
    std::lock_guard<std::mutex> l(mu_);
    hashed_ = target;
    if (!error.empty()) break;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[md[i] >> 4];
    hex += kHex[md[i] & 15];
  }
  if (error.empty() && !sync_if_.empty() && hex == sync_if_ && ::fdatasync(fd_) != 0)
    error = std::string("fdatasync: ") + std::strerror(errno);
  {
    std::lock_guard<std::mutex> l(mu_);
    finished_ = true;
    error_ = error;
    if (error.empty() && hashed_ >= size_)
      digest_ = hex;
    else if (error_.empty())
      error_ = "stopped before the end";
  }
  cv_.notify_all();
}

std::string HashFile(int fd, uint64_t size, StreamHasher::Kind kind, std::string* error) {
  StreamHasher h(fd, size, kind);
  h.Advance(size);
  return h.Finish(error);
}

}  // namespace berth
