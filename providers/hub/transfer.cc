#include "providers/hub/transfer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "providers/http/curl_easy.h"

namespace berth {
namespace {

/// "bytes START-END/TOTAL" naming exactly the range asked.
bool ContentRangeMatches(const std::string& value, uint64_t start, uint64_t end) {
  std::string want = "bytes " + std::to_string(start) + "-" + std::to_string(end) + "/";
  return value.rfind(want, 0) == 0;
}

/// The first body bytes: is this the answer asked for? Error answers are read and dropped (the
/// status says what happened); a wrong range stops the transfer with its reason.
bool CheckAnswer(Transfer* t) {
  t->checked = true;
  long status = ResponseStatus(t->easy);
  if (status != 200 && status != 206) {
    t->error_body = true;
    return true;
  }
  if (!t->ranged && status == 206) {  // a range nobody asked for
    t->failure = TransferFailure::kBadContentRange;
    return false;
  }
  if (!t->ranged) return true;
  if (status == 200) {
    t->failure = TransferFailure::kRangeIgnored;
    return false;
  }
  if (!ContentRangeMatches(ResponseHeader(t->easy, "Content-Range"), t->start, t->end)) {
    t->failure = TransferFailure::kBadContentRange;
    return false;
  }
  return true;
}

/// pwrite of all `len` bytes at `offset`; the bytes written, errno in `*err` when short.
size_t WriteAll(int fd, const char* data, size_t len, uint64_t offset, int* err) {
  size_t done = 0;
  while (done < len) {
    ssize_t w = ::pwrite(fd, data + done, len - done, static_cast<off_t>(offset + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *err = w < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(w);
  }
  return done;
}

size_t OnWrite(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  if (!t->checked && !CheckAnswer(t)) return 0;
  if (t->error_body) return len;
  if (t->pos + len > t->end + 1) {
    t->failure = TransferFailure::kTooLong;
    return 0;
  }
  if (t->pending.size() + len > kWriteBlock && !FlushTransfer(t)) return 0;
  t->pending.insert(t->pending.end(), data, data + len);
  t->pos += len;
  return len;
}

std::unique_ptr<Transfer> NewTransfer(const HubHttp& http, FileJob* file, const std::string& url,
                                      const std::vector<std::string>& extra) {
  auto t = std::make_unique<Transfer>();
  t->easy = curl_easy_init();
  t->file = file;
  t->url = url;
  void* headers = nullptr;
  http.Configure(t->easy, url, extra, &headers);
  t->headers = static_cast<curl_slist*>(headers);
  curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t.get());
  return t;
}

}  // namespace

Transfer::~Transfer() {
  if (easy) curl_easy_cleanup(easy);
  if (headers) curl_slist_free_all(headers);
}

std::unique_ptr<Transfer> NewHeadTransfer(const HubHttp& http, FileJob* file,
                                          const std::string& url) {
  auto t = NewTransfer(http, file, url, {});
  t->head = true;
  curl_easy_setopt(t->easy, CURLOPT_NOBODY, 1L);
  return t;
}

std::unique_ptr<Transfer> NewRangeTransfer(const HubHttp& http, FileJob* file,
                                           const std::string& url, int fd, uint64_t start,
                                           uint64_t end, bool ranged, long buffer_bytes) {
  std::vector<std::string> extra;
  if (ranged) extra.push_back("Range: bytes=" + std::to_string(start) + "-" + std::to_string(end));
  auto t = NewTransfer(http, file, url, extra);
  t->fd = fd;
  t->start = t->pos = start;
  t->end = end;
  t->ranged = ranged;
  curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, &OnWrite);
  curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t.get());
  curl_easy_setopt(t->easy, CURLOPT_BUFFERSIZE, buffer_bytes);
  t->pending.reserve(kWriteBlock);
  return t;
}

bool FlushTransfer(Transfer* t) {
  if (t->pending.empty()) return true;
  uint64_t at = t->written();
  size_t done = WriteAll(t->fd, t->pending.data(), t->pending.size(), at, &t->write_errno);
  if (done < t->pending.size()) {
    t->failure = TransferFailure::kDiskWrite;
    t->pos = at + done;  // what is not in the file is not taken
    t->pending.clear();
    return false;
  }
  t->pending.clear();
  return true;
}

std::string FailureText(const Transfer& t) {
  switch (t.failure) {
    case TransferFailure::kNone:
      return "";
    case TransferFailure::kRangeIgnored:
      return "the server ignored Range (HTTP 200)";
    case TransferFailure::kBadContentRange:
      return "the answer's Content-Range does not match the range asked (bytes " +
             std::to_string(t.start) + "-" + std::to_string(t.end) + ")";
    case TransferFailure::kTooLong:
      return "the server sent more bytes than asked";
    case TransferFailure::kDiskWrite:
      return std::string("cannot write") + (t.write_errno == ENOSPC ? " (disk full)" : "") + ": " +
             std::strerror(t.write_errno);
  }
  return "";
}

}  // namespace berth
