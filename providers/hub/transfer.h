// One transfer of the downloader: a curl easy handle that either resolves a file (HEAD on
// /resolve, redirects not followed) or fetches one byte range of it into the partial file with
// pwrite, checking before the first byte lands that the answer is the range asked for.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "providers/hub/http.h"

namespace berth {

struct FileJob;  // the downloader's record of one blob

/// Why a transfer stopped on its own, before libcurl's CURLcode and the HTTP status say more.
enum class TransferFailure {
  kNone,
  kRangeIgnored,     // a range was asked and the server sent the whole file (200): one stream
  kBadContentRange,  // a 206 for another range than asked
  kTooLong,          // more bytes than asked
  kDiskWrite,        // pwrite failed (disk full, I/O error): no retry helps
};

struct Transfer {
  ~Transfer();  // frees the handle; the owner removes it from its multi handle first

  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  FileJob* file = nullptr;
  bool head = false;  // resolving (HEAD) rather than fetching
  int chunk = -1;     // the chunk fetched; -1 for a HEAD
  std::string url;    // the URL asked (a CDN URL may have been replaced since)
  int attempt = 1;    // of this request, counted across retries and redirects
  bool cancelled = false;

  // Fetching only.
  int fd = -1;
  uint64_t start = 0, end = 0;  // inclusive byte range asked
  uint64_t pos = 0;             // next byte to take from the server
  /// Bytes taken but not yet written: libcurl hands the body over in pieces of at most 16 KiB;
  /// written in blocks of kWriteBlock instead, the page cache costs a third less CPU (fewer
  /// calls, no zeroing of the part of a new folio a small write leaves).
  std::vector<char> pending;
  bool ranged = false;      // a Range header was sent
  bool checked = false;     // the status and Content-Range were checked
  bool error_body = false;  // the answer is an error: its body is read and dropped
  TransferFailure failure = TransferFailure::kNone;
  int write_errno = 0;  // kDiskWrite
  uint64_t Fetched() const { return pos - start; }
  /// Bytes [start, written()) are in the file.
  uint64_t written() const { return pos - pending.size(); }
};

/// The size of one write into the partial file.
constexpr size_t kWriteBlock = 128 * 1024;

/// Writes what `t` holds back; false (with kDiskWrite and written() where it stopped) when the
/// disk refuses. Called when a transfer ends, before its bytes are counted.
bool FlushTransfer(Transfer* t);

/// A HEAD of `url` (redirects not followed).
std::unique_ptr<Transfer> NewHeadTransfer(const HubHttp& http, FileJob* file,
                                          const std::string& url);

/// A GET of bytes [start, end] of `url` into `fd` at the same offsets; `ranged` sends a Range
/// header (false for a whole file from 0). `buffer_bytes` is curl's receive buffer.
std::unique_ptr<Transfer> NewRangeTransfer(const HubHttp& http, FileJob* file,
                                           const std::string& url, int fd, uint64_t start,
                                           uint64_t end, bool ranged, long buffer_bytes);

/// What went wrong, for an operator: "the server ignored Range (HTTP 200)", "cannot write (disk
/// full): No space left on device"...; "" for kNone.
std::string FailureText(const Transfer& t);

}  // namespace berth
