#include "providers/hub/hasher.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace berth {

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

void StreamHasher::Run() {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, kind_ == Kind::kSha256 ? EVP_sha256() : EVP_sha1(), nullptr);
  if (kind_ == Kind::kGitSha1) {
    std::string head = "blob " + std::to_string(size_) + std::string(1, '\0');
    EVP_DigestUpdate(ctx, head.data(), head.size());
  }
  std::vector<unsigned char> buf(1 << 20);
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
    while (pos < target) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), target - pos));
      ssize_t n = ::pread(fd_, buf.data(), want, static_cast<off_t>(pos));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error = n < 0 ? std::strerror(errno) : "file shorter than its written size";
        break;
      }
      EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(n));
      pos += static_cast<uint64_t>(n);
    }
    std::lock_guard<std::mutex> l(mu_);
    hashed_ = pos;
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

}  // namespace berth
