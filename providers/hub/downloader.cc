#include "providers/hub/downloader.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "engine/core/log.h"
#include "providers/hub/hasher.h"

namespace berth {
namespace {

using Clock = std::chrono::steady_clock;

enum class ChunkState : uint8_t { kPending, kInFlight, kDone };

struct FileJob {
  HubFileEntry entry;
  std::string resolve_url;
  std::string url;  // where the bytes are: the CDN Location, or the resolve URL itself
  bool resolved = false;
  bool resolving = false;
  int fd = -1;
  int lock_fd = -1;
  uint64_t chunk = 0;  // chunk size; == size when fetched in one stream
  std::vector<ChunkState> chunks;
  bool single_stream = false;      // the server ignored Range: one stream from 0
  bool chunk_map = false;          // a chunk map file tracks progress (chunked files)
  uint64_t resume_at = 0;          // one-stream files: the first byte still missing
  std::vector<uint64_t> salvaged;  // chunked files: bytes of each pending chunk already written
  int cdn_refusals = 0;
  std::unique_ptr<StreamHasher> hasher;
  int verify_failures = 0;
  int in_flight = 0;
  bool finished = false;
  Clock::time_point not_before{};
  uint64_t Watermark() const {
    uint64_t w = 0;
    for (size_t i = 0; i < chunks.size() && chunks[i] == ChunkState::kDone; ++i)
      w = std::min<uint64_t>(entry.size, (i + 1) * chunk);
    return w;
  }
};

struct Transfer {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  FileJob* file = nullptr;
  bool head = false;  // resolving (HEAD) rather than fetching
  int chunk = -1;
  uint64_t start = 0, end = 0;  // inclusive byte range asked
  uint64_t pos = 0;             // next byte to write
  bool ranged = false;
  long status = 0;
  bool checked = false;  // status and Content-Range checked on first body bytes
  std::map<std::string, std::string> resp_headers;
  std::string error;   // set by the write callback when it aborts
  bool fatal = false;  // do not retry (disk full, bad server answer)
  bool cancelled = false;
  int attempt = 1;
  std::string url;  // the URL this transfer fetched (a CDN URL may have been replaced since)
};

class Downloader {
 public:
  Downloader(HubHttp& http, const CacheLayout& layout, std::string repo_id, std::string commit,
             DownloadStats* stats)
      : http_(http),
        opt_(http.options()),
        layout_(layout),
        repo_(std::move(repo_id)),
        commit_(std::move(commit)),
        stats_(stats),
        rng_(std::random_device{}()) {}

  ~Downloader() {
    for (auto& t : active_) Release(t.get(), false);
    if (multi_) curl_multi_cleanup(multi_);
    for (auto& f : files_) Close(f.get());
  }

  Status Run(const std::vector<HubFileEntry>& entries);

 private:
  Status Prepare(FileJob* f);
  void Close(FileJob* f) {
    f->hasher.reset();
    if (f->fd >= 0) ::close(f->fd);
    f->fd = -1;
    if (f->lock_fd >= 0) ::close(f->lock_fd);  // releases the flock
    f->lock_fd = -1;
  }
  Transfer* StartHead(FileJob* f, const std::string& url);
  Transfer* StartChunk(FileJob* f, int chunk);
  void Release(Transfer* t, bool remove);
  Status OnDone(Transfer* t, CURLcode code);
  Status Retry(FileJob* f, int chunk, const std::string& why, long wait_ms, int attempt);
  Status Finalize(FileJob* f);
  void SaveChunkMap(FileJob* f);
  void Progress(bool force);
  static size_t OnWrite(char* data, size_t size, size_t n, void* user);
  static size_t OnHeader(char* data, size_t size, size_t n, void* user);

  HubHttp& http_;
  const HubOptions& opt_;
  const CacheLayout& layout_;
  std::string repo_, commit_;
  DownloadStats* stats_;
  std::mt19937 rng_;
  CURLM* multi_ = nullptr;
  std::vector<std::unique_ptr<FileJob>> files_;
  std::vector<std::unique_ptr<Transfer>> active_;
  struct Delayed {
    FileJob* file;
    int chunk;  // -1: resolve again
    Clock::time_point at;
    int attempt;
  };
  std::deque<Delayed> delayed_;
  Status fatal_;
  uint64_t total_ = 0, done_bytes_ = 0;
  int files_done_ = 0;
  Clock::time_point started_ = Clock::now(), last_progress_{};
};

Status Downloader::Prepare(FileJob* f) {
  const HubFileEntry& e = f->entry;
  std::string blob = layout_.BlobPath(e.etag());
  struct stat st;
  if (::stat(blob.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == e.size) {
    stats_->bytes_reused += e.size;
    f->finished = true;
    ++files_done_;
    done_bytes_ += e.size;
    return Status::Ok();
  }
  // The same lock huggingface_hub takes, so a concurrent Python download of this blob waits.
  f->lock_fd = ::open(layout_.LockPath(e.etag()).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664);
  if (f->lock_fd < 0)
    return Status::IoError("cannot open lock " + layout_.LockPath(e.etag()) + ": " +
                           std::strerror(errno));
  if (::flock(f->lock_fd, LOCK_EX) != 0)
    return Status::IoError("cannot lock " + layout_.LockPath(e.etag()) + ": " +
                           std::strerror(errno));
  if (::stat(blob.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == e.size) {
    Close(f);  // someone else finished it while we waited
    stats_->bytes_reused += e.size;
    f->finished = true;
    ++files_done_;
    done_bytes_ += e.size;
    return Status::Ok();
  }
  std::string inc = layout_.IncompletePath(e.etag());
  bool had_partial = ::stat(inc.c_str(), &st) == 0;
  uint64_t partial_size = had_partial ? static_cast<uint64_t>(st.st_size) : 0;
  f->fd = ::open(inc.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (f->fd < 0) return Status::IoError("cannot open " + inc + ": " + std::strerror(errno));
  bool chunked = e.size >= opt_.parallel_threshold;
  f->chunk = chunked ? opt_.chunk_bytes : std::max<uint64_t>(e.size, 1);
  size_t n = static_cast<size_t>(e.size == 0 ? 0 : (e.size + f->chunk - 1) / f->chunk);
  f->chunks.assign(n, ChunkState::kPending);
  f->chunk_map = chunked;
  uint64_t resumed = 0;
  std::ifstream map(layout_.ChunkMapPath(e.etag()));
  uint64_t map_size = 0, map_chunk = 0;
  if (had_partial && map >> map_size >> map_chunk && map_size == e.size && map_chunk == f->chunk) {
    size_t idx;
    while (map >> idx)
      if (idx < n) f->chunks[idx] = ChunkState::kDone;
  } else if (had_partial) {
    // No map of ours: a contiguous prefix (huggingface_hub 0.36 appends), whole chunks of it.
    // Where the data really ends is the first hole: a sparse file is never taken for data.
    off_t hole = ::lseek(f->fd, 0, SEEK_HOLE);
    if (hole >= 0) partial_size = std::min<uint64_t>(partial_size, static_cast<uint64_t>(hole));
    for (size_t i = 0; i < n && (i + 1) * f->chunk <= partial_size; ++i)
      f->chunks[i] = ChunkState::kDone;
    if (!chunked && partial_size < e.size) {
      // One stream: resume from the byte where it stopped.
      f->chunks.assign(n, ChunkState::kPending);
      f->resume_at = partial_size;
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (f->chunks[i] == ChunkState::kDone)
      resumed += std::min<uint64_t>(f->chunk, e.size - i * f->chunk);
  f->salvaged.assign(n, 0);
  if (chunked && had_partial) {
    // A chunk cut short (kill -9 mid-transfer) was written from its start on: the file system
    // knows where its data ends (SEEK_HOLE). Keep that much, to the block before it.
    struct stat fst;
    uint64_t block = ::fstat(f->fd, &fst) == 0 && fst.st_blksize > 0
                         ? static_cast<uint64_t>(fst.st_blksize)
                         : 4096;
    for (size_t i = 0; i < n; ++i) {
      if (f->chunks[i] == ChunkState::kDone) continue;
      uint64_t start = i * f->chunk, end = std::min<uint64_t>(e.size, start + f->chunk);
      off_t data = ::lseek(f->fd, static_cast<off_t>(start), SEEK_DATA);
      if (data < 0 || static_cast<uint64_t>(data) != start) continue;
      off_t hole = ::lseek(f->fd, static_cast<off_t>(start), SEEK_HOLE);
      if (hole < 0) continue;
      uint64_t written = std::min<uint64_t>(static_cast<uint64_t>(hole), end) - start;
      written = written / block * block;
      if (written >= block) written -= block;  // the last block may be half written
      f->salvaged[i] = written;
      resumed += written;
    }
  }
  if (!chunked && had_partial && partial_size < e.size) resumed = partial_size;
  stats_->bytes_resumed += resumed;
  done_bytes_ += resumed;
  if (chunked) SaveChunkMap(f);  // exists before the first write: its absence means "not ours"
  // Chunks land anywhere in a chunked file; a one-stream file stays a contiguous prefix, as
  // huggingface_hub's own partial files are.
  if (chunked && ::ftruncate(f->fd, static_cast<off_t>(e.size)) != 0)
    return Status::IoError("cannot size " + inc + ": " + std::strerror(errno));
  if (!chunked && partial_size > e.size && ::ftruncate(f->fd, 0) == 0) partial_size = 0;
  f->hasher = std::make_unique<StreamHasher>(
      f->fd, e.size, e.is_lfs() ? StreamHasher::Kind::kSha256 : StreamHasher::Kind::kGitSha1,
      e.etag());
  f->hasher->Advance(f->Watermark());
  if (!chunked && partial_size < e.size) f->hasher->Advance(partial_size);
  return Status::Ok();
}

void Downloader::SaveChunkMap(FileJob* f) {
  std::ostringstream s;
  s << f->entry.size << " " << f->chunk << "\n";
  for (size_t i = 0; i < f->chunks.size(); ++i)
    if (f->chunks[i] == ChunkState::kDone) s << i << "\n";
  // Not fsynced: after a crash a lost entry only means one chunk fetched again.
  // A map that cannot be written (disk full) leaves the previous one: it is only ever behind.
  std::string path = layout_.ChunkMapPath(f->entry.etag());
  std::string tmp = path + ".tmp";
  bool ok;
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << s.str();
    out.flush();
    ok = static_cast<bool>(out);
  }
  if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) std::remove(tmp.c_str());
}

Transfer* Downloader::StartHead(FileJob* f, const std::string& url) {
  auto t = std::make_unique<Transfer>();
  t->easy = curl_easy_init();
  t->file = f;
  t->head = true;
  void* headers = nullptr;
  http_.Configure(t->easy, url, {}, &headers);
  t->headers = static_cast<curl_slist*>(headers);
  curl_easy_setopt(t->easy, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(t->easy, CURLOPT_HEADERFUNCTION, &Downloader::OnHeader);
  curl_easy_setopt(t->easy, CURLOPT_HEADERDATA, t.get());
  curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t.get());
  f->resolving = true;
  f->in_flight++;
  curl_multi_add_handle(multi_, t->easy);
  active_.push_back(std::move(t));
  return active_.back().get();
}

Transfer* Downloader::StartChunk(FileJob* f, int chunk) {
  auto t = std::make_unique<Transfer>();
  t->easy = curl_easy_init();
  t->file = f;
  t->chunk = chunk;
  const HubFileEntry& e = f->entry;
  if (f->single_stream) {
    t->start = 0;
    t->end = e.size ? e.size - 1 : 0;
  } else {
    t->start = static_cast<uint64_t>(chunk) * f->chunk;
    t->end = std::min<uint64_t>(e.size, t->start + f->chunk) - 1;
    if (f->chunk_map)
      t->start += std::min<uint64_t>(f->salvaged[static_cast<size_t>(chunk)], t->end - t->start);
    // One stream, maybe resumed: continue where the partial file's bytes end.
    if (!f->chunk_map) t->start = std::min<uint64_t>(f->resume_at, t->end);
  }
  t->pos = t->start;
  t->ranged = e.size > 0 && !(t->start == 0 && t->end + 1 == e.size);
  std::vector<std::string> extra;
  if (t->ranged)
    extra.push_back("Range: bytes=" + std::to_string(t->start) + "-" + std::to_string(t->end));
  void* headers = nullptr;
  t->url = f->url;
  http_.Configure(t->easy, f->url, extra, &headers);
  t->headers = static_cast<curl_slist*>(headers);
  curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, &Downloader::OnWrite);
  curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t.get());
  curl_easy_setopt(t->easy, CURLOPT_HEADERFUNCTION, &Downloader::OnHeader);
  curl_easy_setopt(t->easy, CURLOPT_HEADERDATA, t.get());
  curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t.get());
  curl_easy_setopt(t->easy, CURLOPT_BUFFERSIZE, 256L * 1024);
  if (f->single_stream) {
    for (auto& c : f->chunks) c = ChunkState::kInFlight;
  } else {
    f->chunks[static_cast<size_t>(chunk)] = ChunkState::kInFlight;
  }
  f->in_flight++;
  curl_multi_add_handle(multi_, t->easy);
  active_.push_back(std::move(t));
  return active_.back().get();
}

size_t Downloader::OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->resp_headers.clear();
    size_t sp = line.find(' ');
    t->status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
    return size * n;
  }
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t b = colon + 1;
    while (b < line.size() && line[b] == ' ') ++b;
    size_t e = line.size();
    while (e > b && (line[e - 1] == '\r' || line[e - 1] == '\n' || line[e - 1] == ' ')) --e;
    t->resp_headers[name] = line.substr(b, e - b);
  }
  return size * n;
}

size_t Downloader::OnWrite(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  size_t len = size * n;
  if (!t->checked) {
    t->checked = true;
    if (t->status != 200 && t->status != 206) return 0;  // an error body: read it in OnDone
    if (t->ranged) {
      if (t->status == 200) {
        t->error = "the server ignored Range (HTTP 200)";
        return 0;
      }
      const std::string& cr = t->resp_headers["content-range"];
      std::string want = "bytes " + std::to_string(t->start) + "-";
      if (cr.rfind(want, 0) != 0) {
        t->error = "Content-Range '" + cr + "' does not match the range asked (" + want + ")";
        t->fatal = false;
        return 0;
      }
    }
  }
  if (t->status != 200 && t->status != 206) return 0;
  if (t->pos + len > t->end + 1) {
    t->error = "the server sent more bytes than asked";
    return 0;
  }
  size_t done = 0;
  while (done < len) {
    ssize_t w = ::pwrite(t->file->fd, data + done, len - done, static_cast<off_t>(t->pos + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      t->error = std::string("cannot write ") + (errno == ENOSPC ? "(disk full)" : "") + ": " +
                 std::strerror(errno);
      t->fatal = true;
      return 0;
    }
    done += static_cast<size_t>(w);
  }
  t->pos += len;
  return len;
}

void Downloader::Release(Transfer* t, bool remove) {
  if (remove && multi_) curl_multi_remove_handle(multi_, t->easy);
  if (t->easy) curl_easy_cleanup(t->easy);
  t->easy = nullptr;
  if (t->headers) curl_slist_free_all(t->headers);
  t->headers = nullptr;
}

Status Downloader::Retry(FileJob* f, int chunk, const std::string& why, long wait_ms, int attempt) {
  if (attempt >= opt_.max_attempts)
    return Status::Unavailable("downloading " + f->entry.path + " of " + repo_ + ": " + why +
                               " (gave up after " + std::to_string(attempt) +
                               " attempts; run again to resume)");
  stats_->retries++;
  spdlog::info("{} of {}: {}; retry {} of {}", f->entry.path, repo_, why, attempt,
               opt_.max_attempts);
  long backoff = std::min<long>(static_cast<long>(opt_.backoff_ms) << std::min(attempt - 1, 10),
                                opt_.max_backoff_ms);
  backoff += std::uniform_int_distribution<long>(0, backoff / 2)(rng_);
  delayed_.push_back({f, chunk,
                      Clock::now() + std::chrono::milliseconds(std::max(wait_ms, backoff)),
                      attempt + 1});
  return Status::Ok();
}

Status Downloader::OnDone(Transfer* t, CURLcode code) {
  FileJob* f = t->file;
  f->in_flight--;
  std::string what = f->entry.path + " of " + repo_;
  HttpResponse resp;
  resp.status = t->status;
  resp.headers = t->resp_headers;
  if (t->head) {
    f->resolving = false;
    if (code != CURLE_OK) return Retry(f, -1, curl_easy_strerror(code), 0, t->attempt);
    if (t->status >= 300 && t->status < 400) {
      std::string loc = resp.Header("location");
      if (loc.empty()) return Status::Unavailable(what + ": redirect without Location");
      std::string next = ResolveLocation(f->resolve_url, loc);
      if (loc.find("://") == std::string::npos) {  // relative: ask again there (renamed repo)
        if (t->attempt > 10) return Status::Unavailable(what + ": too many redirects");
        f->resolve_url = next;
        return Retry(f, -1, "redirect", 0, 0);
      }
      f->url = next;  // absolute: the CDN, fetched without our token
    } else if (t->status == 200) {
      f->url = f->resolve_url;
    } else if (t->status == 408 || t->status == 429 || t->status >= 500) {
      return Retry(f, -1, HubError(resp, what, !opt_.token.empty()).message(), RetryAfterMs(resp),
                   t->attempt);
    } else {
      return HubError(resp, "downloading " + what, !opt_.token.empty());
    }
    std::string size = resp.Header("x-linked-size");
    if (size.empty() && t->status == 200) size = resp.Header("content-length");
    if (!size.empty() && std::stoull(size) != f->entry.size)
      return Status::Unavailable(what + ": the Hub says " + size + " bytes, its listing said " +
                                 std::to_string(f->entry.size));
    f->resolved = true;
    return Status::Ok();
  }

  int chunk = t->chunk;
  auto back_to_pending = [&] {
    if (f->single_stream) {
      for (auto& c : f->chunks) c = ChunkState::kPending;
    } else {
      f->chunks[static_cast<size_t>(chunk)] = ChunkState::kPending;
    }
  };
  uint64_t fetched = t->pos - t->start;
  stats_->bytes_fetched += fetched;
  if (t->fatal) {
    back_to_pending();
    return Status::IoError("downloading " + what + ": " + t->error + " in " +
                           layout_.IncompletePath(f->entry.etag()) +
                           "; the partial file is kept and the next run resumes it");
  }
  if (!t->error.empty() && t->error.find("ignored Range") != std::string::npos) {
    // A server that will not do ranges: take the whole file in one stream instead.
    for (auto& tr : active_)
      if (tr->file == f && tr.get() != t && !tr->cancelled) tr->cancelled = true;
    f->single_stream = true;
    f->resume_at = 0;
    std::fill(f->salvaged.begin(), f->salvaged.end(), 0);
    for (auto& c : f->chunks) c = ChunkState::kPending;
    return Retry(f, 0, t->error, 0, t->attempt);
  }
  bool complete =
      code == CURLE_OK && (t->status == 200 || t->status == 206) && t->pos == t->end + 1;
  if (f->entry.size == 0 && code == CURLE_OK && (t->status == 200 || t->status == 206))
    complete = true;
  if (!complete) {
    bool from_cdn = OriginOf(t->url) != OriginOf(opt_.endpoint);
    if (from_cdn && (t->status == 403 || t->status == 400 || t->status == 410)) {
      // An expired CDN URL: resolve again, then fetch what is missing.
      back_to_pending();
      if (t->url != f->url) return Status::Ok();  // already replaced: the chunk goes again
      f->resolved = false;
      f->url.clear();
      if (++f->cdn_refusals > opt_.max_attempts)
        return Status::Unavailable("downloading " + what +
                                   ": the CDN refused every URL the Hub "
                                   "gave (HTTP " +
                                   std::to_string(t->status) + ")");
      if (f->resolving) return Status::Ok();
      return Retry(f, -1, "the CDN refused the URL (HTTP " + std::to_string(t->status) + ")", 0, 0);
    }
    if (t->status >= 300 && t->status != 408 && t->status != 429 && t->status < 500)
      return HubError(resp, "downloading " + what, !opt_.token.empty());
    // Keep what arrived: the rest of this chunk is fetched from where it stopped.
    back_to_pending();
    std::string why = code != CURLE_OK    ? curl_easy_strerror(code)
                      : !t->error.empty() ? t->error
                                          : "HTTP " + std::to_string(t->status);
    if (!f->single_stream && !f->chunk_map && t->pos > t->start) {
      f->resume_at = t->pos;  // one-stream files resume from the last byte written
      f->hasher->Advance(t->pos);
    }
    if (!f->single_stream && f->chunk_map && chunk >= 0)
      f->salvaged[static_cast<size_t>(chunk)] = t->pos - static_cast<uint64_t>(chunk) * f->chunk;
    return Retry(f, chunk, why, RetryAfterMs(resp), t->attempt);
  }
  if (f->single_stream) {
    for (auto& c : f->chunks) c = ChunkState::kDone;
  } else {
    f->chunks[static_cast<size_t>(chunk)] = ChunkState::kDone;
  }
  done_bytes_ += fetched;
  f->cdn_refusals = 0;
  if (f->chunk_map) {
    SaveChunkMap(f);
    // Start writing the chunk back now, so the final sync has little left to do.
    ::sync_file_range(f->fd, static_cast<off64_t>(t->start),
                      static_cast<off64_t>(t->pos - t->start), SYNC_FILE_RANGE_WRITE);
  }
  f->hasher->Advance(f->single_stream || !f->chunk_map ? t->pos : f->Watermark());
  return Status::Ok();
}

Status Downloader::Finalize(FileJob* f) {
  const HubFileEntry& e = f->entry;
  std::string error;
  std::string digest = f->hasher->Finish(&error);
  std::string inc = layout_.IncompletePath(e.etag());
  if (!error.empty()) return Status::IoError("cannot read back " + inc + ": " + error);
  if (digest != e.etag()) {
    // Wrong bytes (a bad mirror, a corrupt CDN object, a torn partial): discard, try once more.
    f->hasher.reset();
    ::ftruncate(f->fd, 0);
    ::unlink(layout_.ChunkMapPath(e.etag()).c_str());
    if (++f->verify_failures > 1)
      return Status::Unavailable(
          e.path + " of " + repo_ + " failed verification twice (expected " +
          (e.is_lfs() ? "sha256 " : "git sha1 ") + e.etag() + ", got " + digest +
          "): the server sends wrong bytes; the partial was discarded. Check HF_ENDPOINT or "
          "any proxy in between");
    stats_->retries++;
    for (auto& c : f->chunks) c = ChunkState::kPending;
    f->single_stream = false;
    f->resume_at = 0;
    std::fill(f->salvaged.begin(), f->salvaged.end(), 0);
    if (f->chunk_map) SaveChunkMap(f);
    f->hasher = std::make_unique<StreamHasher>(
        f->fd, e.size, e.is_lfs() ? StreamHasher::Kind::kSha256 : StreamHasher::Kind::kGitSha1,
        e.etag());
    done_bytes_ -= std::min(done_bytes_, e.size);
    return Status::Ok();
  }
  // The hasher already fdatasync'ed the verified bytes, off this thread.
  ::fchmod(f->fd, 0644);
  if (::rename(inc.c_str(), layout_.BlobPath(e.etag()).c_str()) != 0)
    return Status::IoError("cannot rename " + inc + ": " + std::strerror(errno));
  ::unlink(layout_.ChunkMapPath(e.etag()).c_str());
  Close(f);
  f->finished = true;
  ++files_done_;
  stats_->files_fetched++;
  return Status::Ok();
}

void Downloader::Progress(bool force) {
  if (!opt_.on_progress) return;
  auto now = Clock::now();
  if (!force && now - last_progress_ < std::chrono::milliseconds(250)) return;
  last_progress_ = now;
  PullProgress p;
  p.repo_id = repo_;
  p.bytes_total = total_;
  uint64_t inflight = 0;
  for (const auto& t : active_)
    if (!t->head) inflight += t->pos - t->start;
  p.bytes_done = std::min(total_, done_bytes_ + inflight);
  p.bytes_fetched = stats_->bytes_fetched + inflight;
  p.files_done = files_done_;
  p.files_total = static_cast<int>(files_.size());
  p.seconds = std::chrono::duration<double>(now - started_).count();
  opt_.on_progress(p);
}

Status Downloader::Run(const std::vector<HubFileEntry>& entries) {
  multi_ = curl_multi_init();
  curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS, static_cast<long>(opt_.connections));
  for (const auto& e : entries) {
    auto f = std::make_unique<FileJob>();
    f->entry = e;
    f->resolve_url =
        opt_.endpoint + "/" + repo_ + "/resolve/" + commit_ + "/" + UrlEncode(e.path, true);
    total_ += e.size;
    files_.push_back(std::move(f));
  }
  // Big files first: their chunks keep every connection busy while small files fill gaps.
  std::stable_sort(files_.begin(), files_.end(),
                   [](const auto& a, const auto& b) { return a->entry.size > b->entry.size; });
  size_t next_prepare = 0;
  for (;;) {
    // Schedule: delayed retries that are due, then new work, up to the connection budget.
    auto now = Clock::now();
    for (auto it = delayed_.begin(); it != delayed_.end();) {
      if (it->at > now || static_cast<int>(active_.size()) >= opt_.connections) {
        ++it;
        continue;
      }
      Transfer* t = nullptr;
      if (it->chunk < 0 || !it->file->resolved) {
        if (!it->file->resolving) t = StartHead(it->file, it->file->resolve_url);
      } else if (it->file->chunks[static_cast<size_t>(it->chunk)] == ChunkState::kPending) {
        t = StartChunk(it->file, it->chunk);
      }
      if (t) t->attempt = it->attempt;
      it = delayed_.erase(it);
    }
    bool pending_delay_for = false;
    for (size_t i = 0; i < files_.size() && static_cast<int>(active_.size()) < opt_.connections;
         ++i) {
      FileJob* f = files_[i].get();
      if (i >= next_prepare) {
        Status s = Prepare(f);
        if (!s.ok()) return s;
        next_prepare = i + 1;
      }
      if (f->finished) continue;
      pending_delay_for = false;
      for (const auto& d : delayed_) pending_delay_for = pending_delay_for || d.file == f;
      if (pending_delay_for) continue;
      if (!f->resolved) {
        if (!f->resolving) StartHead(f, f->resolve_url);
        continue;
      }
      if (f->single_stream) {
        if (f->in_flight == 0 && !f->chunks.empty() && f->chunks[0] == ChunkState::kPending)
          StartChunk(f, 0);
        continue;
      }
      for (size_t c = 0;
           c < f->chunks.size() && static_cast<int>(active_.size()) < opt_.connections; ++c)
        if (f->chunks[c] == ChunkState::kPending) StartChunk(f, static_cast<int>(c));
      if (f->entry.size == 0 && f->in_flight == 0 && f->chunks.empty()) {
        Status s = Finalize(f);
        if (!s.ok()) return s;
      }
    }
    // Files whose every chunk is done: verify and publish the blob.
    bool all_done = true;
    for (auto& f : files_) {
      if (f->finished) continue;
      all_done = false;
      bool chunks_done =
          !f->chunks.empty() && std::all_of(f->chunks.begin(), f->chunks.end(),
                                            [](ChunkState c) { return c == ChunkState::kDone; });
      if (f->fd >= 0 && f->in_flight == 0 && chunks_done && f->hasher && f->hasher->done()) {
        Status s = Finalize(f.get());
        if (!s.ok()) return s;
      }
    }
    if (all_done && next_prepare >= files_.size()) break;
    // Cancelled transfers (a file switched to one stream) leave now.
    for (auto it = active_.begin(); it != active_.end();) {
      if ((*it)->cancelled) {
        (*it)->file->in_flight--;
        Release(it->get(), true);
        it = active_.erase(it);
      } else {
        ++it;
      }
    }
    int running = 0;
    curl_multi_perform(multi_, &running);
    while (CURLMsg* msg = curl_multi_info_read(multi_, &running)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
      CURLcode code = msg->data.result;
      if (t->status == 0) curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
      Status s = t->cancelled ? Status::Ok() : OnDone(t, code);
      if (t->cancelled) t->file->in_flight--;
      Release(t, true);
      active_.erase(std::find_if(active_.begin(), active_.end(),
                                 [t](const auto& p) { return p.get() == t; }));
      if (!s.ok()) return s;
    }
    Progress(false);
    if (opt_.cancel && opt_.cancel->load())
      return Status::Unavailable("download of " + repo_ +
                                 " interrupted; the partial files are kept "
                                 "and the next run resumes them");
    bool waiting_hash = false;
    for (auto& f : files_)
      waiting_hash =
          waiting_hash || (!f->finished && f->in_flight == 0 && f->hasher && !f->hasher->done());
    curl_multi_poll(multi_, nullptr, 0, waiting_hash || !delayed_.empty() ? 20 : 100, nullptr);
  }
  Progress(true);
  return Status::Ok();
}

}  // namespace

Status DownloadBlobs(HubHttp& http, const CacheLayout& layout, const std::string& repo_id,
                     const std::string& commit, const std::vector<HubFileEntry>& files,
                     DownloadStats* stats) {
  BERTH_RETURN_IF_ERROR(layout.MakeDirs());
  // One download per blob: two paths with the same content share it.
  std::vector<HubFileEntry> unique;
  for (const auto& f : files)
    if (std::none_of(unique.begin(), unique.end(),
                     [&](const HubFileEntry& u) { return u.etag() == f.etag(); }))
      unique.push_back(f);
  Downloader d(http, layout, repo_id, commit, stats);
  return d.Run(unique);
}

}  // namespace berth
