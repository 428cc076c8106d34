// The scheduler of DownloadBlobs: which transfer runs next on the curl multi handle, and what
// each finished transfer means for its file (Classify, TransferFailure). One transfer is
// transfer.cc; a blob's partial file, lock, hash and rename are partial_blob.cc; what of it is
// already on disk is resume_state.cc.
#include "providers/hub/downloader.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>
#include <random>

#include "core/clock.h"
#include "core/log.h"
#include "providers/http/classify.h"
#include "providers/http/curl_easy.h"
#include "providers/hub/hub_parse.h"
#include "providers/hub/partial_blob.h"
#include "providers/hub/transfer.h"

namespace berth {

/// One blob to fetch: where it is, what of it is on disk, and its running hash.
struct FileJob {
  HubFileEntry entry;
  std::string resolve_url;  // /resolve, or where a same-origin redirect of it pointed
  std::string url;          // where the bytes are: the CDN Location, or the resolve URL itself
  bool resolved = false;
  bool resolving = false;
  int redirects = 0;  // same-origin redirects followed while resolving
  PartialBlob blob;
  bool single_stream = false;  // the server ignored Range: one stream from 0
  int cdn_refusals = 0;
  int in_flight = 0;
  bool finished = false;
};

namespace {

constexpr int kMaxRedirects = 10;
/// curl's receive buffer per transfer: fewer, larger writes into the page cache.
constexpr long kReceiveBuffer = 512L * 1024;

/// The smallest chunk ChunkBytes picks on its own: a request per 8 MiB still costs little.
constexpr uint64_t kMinChunk = 8ull << 20;

HttpResponse AnswerOf(CURL* easy, const std::string& url) {
  HttpResponse r;
  r.status = ResponseStatus(easy);
  r.headers = ResponseHeaders(easy);
  r.url = url;
  return r;
}

class Downloader {
 public:
  Downloader(HubHttp& http, const CacheLayout& layout, std::string repo_id, std::string commit,
             DownloadStats* stats)
      : http_(http),
        opt_(http.options()),
        clock_(opt_.clock ? *opt_.clock : RealClock()),
        policy_(RetryPolicyOf(opt_)),
        layout_(layout),
        repo_(std::move(repo_id)),
        commit_(std::move(commit)),
        stats_(stats),
        rng_(std::random_device{}()) {}

  ~Downloader() {
    for (auto& t : active_)
      if (multi_) curl_multi_remove_handle(multi_, t->easy);
    active_.clear();
    if (multi_) curl_multi_cleanup(multi_);
    for (auto& f : files_) ClosePartialBlob(&f->blob);
  }

  Status Run(const std::vector<HubFileEntry>& entries);

 private:
  struct Delayed {
    FileJob* file;
    int chunk;  // -1: resolve (again)
    Clock::TimePoint at;
    int attempt;
  };

  /// The chunk size of a file of `size` bytes: options().chunk_bytes, or less (down to
  /// kMinChunk) for a file that all connections would otherwise take in one round. Chunks are
  /// hashed in order: with 4 rounds of chunks per file the hash follows the download a quarter
  /// of a file behind, not a whole file, and the last file's hash ends soon after its bytes.
  uint64_t ChunkBytes(uint64_t size) const {
    uint64_t rounds = 4 * static_cast<uint64_t>(std::max(1, opt_.connections));
    return std::min(opt_.chunk_bytes, std::max(kMinChunk, size / rounds));
  }
  Status Prepare(FileJob* f);
  Status StartHead(FileJob* f, int attempt);
  Status StartChunk(FileJob* f, int chunk, int attempt);
  /// Hands `t` to the multi handle; an error of curl's (no memory, a bad handle) ends the run.
  Status Add(std::unique_ptr<Transfer> t);
  void Remove(Transfer* t);
  Status OnDone(Transfer* t, CURLcode code);
  Status OnHeadDone(Transfer* t, CURLcode code);
  Status OnChunkDone(Transfer* t, CURLcode code);
  void SwitchToOneStream(FileJob* f, Transfer* except);
  /// Schedules `chunk` (-1: a HEAD) of `f` again after failed attempt `attempt`, or gives up.
  Status Retry(FileJob* f, int chunk, const std::string& why, long server_wait_ms, int attempt);
  void Schedule(FileJob* f, int chunk, long delay_ms, int attempt);
  Status Finalize(FileJob* f);
  Status StartDue();
  /// Waits for the next thing to do: a transfer's bytes (curl_multi_poll), a hash, or, when
  /// nothing is in flight, the next retry that is due (on the clock).
  Status Wait();
  Status StartNew(size_t* next_prepare);
  Status FinalizeReady(bool* all_done);
  bool WaitingForHash() const;
  void Progress(bool force);
  std::string What(const FileJob* f) const { return f->entry.path + " of " + repo_; }

  HubHttp& http_;
  const HubOptions& opt_;
  Clock& clock_;
  RetryPolicy policy_;
  const CacheLayout& layout_;
  std::string repo_, commit_;
  DownloadStats* stats_;
  std::mt19937 rng_;
  CURLM* multi_ = nullptr;
  std::vector<std::unique_ptr<FileJob>> files_;
  std::vector<std::unique_ptr<Transfer>> active_;
  std::deque<Delayed> delayed_;
  uint64_t total_ = 0, done_bytes_ = 0;
  int files_done_ = 0;
  Clock::TimePoint started_ = clock_.Now(), last_progress_{};
};

Status Downloader::Prepare(FileJob* f) {
  const HubFileEntry& e = f->entry;
  auto opened = OpenPartialBlob(layout_, e, opt_.parallel_threshold, ChunkBytes(e.size), &f->blob);
  if (!opened.ok()) return opened.status();
  if (*opened == BlobOpen::kPresent) {
    stats_->bytes_reused += e.size;
    f->finished = true;
    ++files_done_;
    done_bytes_ += e.size;
    return Status::Ok();
  }
  if (f->blob.replaced_corrupt) stats_->blobs_replaced++;
  uint64_t resumed = f->blob.state.ResumedBytes();
  stats_->bytes_resumed += resumed;
  done_bytes_ += resumed;
  return Status::Ok();
}

/// What a curl multi call's failure means to an operator: the download stopped, nothing is lost.
Status MultiError(const std::string& repo, const char* call, CURLMcode code) {
  return Status::Unavailable("downloading " + repo + ": " + call + " failed (" +
                             curl_multi_strerror(code) +
                             "); the partial files are kept and the next run resumes them");
}

Status Downloader::Add(std::unique_ptr<Transfer> t) {
  CURLMcode code = curl_multi_add_handle(multi_, t->easy);
  if (code != CURLM_OK) return MultiError(repo_, "curl_multi_add_handle", code);
  active_.push_back(std::move(t));
  return Status::Ok();
}

Status Downloader::StartHead(FileJob* f, int attempt) {
  auto t = NewHeadTransfer(http_, f, f->resolve_url);
  t->attempt = attempt;
  f->resolving = true;
  f->in_flight++;
  return Add(std::move(t));
}

Status Downloader::StartChunk(FileJob* f, int chunk, int attempt) {
  const ResumeState& s = f->blob.state;
  const uint64_t size = f->entry.size;
  uint64_t start = 0, end = size ? size - 1 : 0;
  if (!f->single_stream) {
    size_t i = static_cast<size_t>(chunk);
    start = s.ChunkStart(i);
    end = s.ChunkEnd(i) - 1;
    // Continue where earlier bytes end: a salvaged chunk start, or a one-stream prefix.
    start = s.chunked ? start + std::min(s.salvaged[i], end - start) : std::min(s.resume_at, end);
  }
  bool ranged = size > 0 && !(start == 0 && end + 1 == size);
  auto t = NewRangeTransfer(http_, f, f->url, f->blob.fd, start, end, ranged, kReceiveBuffer);
  t->chunk = chunk;
  t->attempt = attempt;
  if (f->single_stream) {
    std::fill(f->blob.state.chunks.begin(), f->blob.state.chunks.end(), ChunkState::kInFlight);
  } else {
    f->blob.state.chunks[static_cast<size_t>(chunk)] = ChunkState::kInFlight;
  }
  f->in_flight++;
  return Add(std::move(t));
}

void Downloader::Remove(Transfer* t) {
  // Fails only for a handle the multi does not hold; the transfer goes either way.
  if (CURLMcode code = curl_multi_remove_handle(multi_, t->easy); code != CURLM_OK)
    spdlog::warn("{}: curl_multi_remove_handle: {}", repo_, curl_multi_strerror(code));
  active_.erase(
      std::find_if(active_.begin(), active_.end(), [t](const auto& p) { return p.get() == t; }));
}

void Downloader::Schedule(FileJob* f, int chunk, long delay_ms, int attempt) {
  delayed_.push_back({f, chunk, clock_.Now() + std::chrono::milliseconds(delay_ms), attempt});
}

Status Downloader::Retry(FileJob* f, int chunk, const std::string& why, long server_wait_ms,
                         int attempt) {
  if (!policy_.MayRetry(attempt))
    return Status::Unavailable("downloading " + What(f) + ": " + why + " (gave up after " +
                               std::to_string(attempt) + " attempts; run again to resume)");
  stats_->retries++;
  spdlog::info("{}: {}; retry {} of {}", What(f), why, attempt, policy_.attempts - 1);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  Schedule(f, chunk, policy_.DelayMs(attempt, server_wait_ms, unit(rng_)), attempt + 1);
  return Status::Ok();
}

Status Downloader::OnDone(Transfer* t, CURLcode code) {
  t->file->in_flight--;
  return t->head ? OnHeadDone(t, code) : OnChunkDone(t, code);
}

Status Downloader::OnHeadDone(Transfer* t, CURLcode code) {
  FileJob* f = t->file;
  f->resolving = false;
  std::string what = What(f);
  HttpResponse resp = AnswerOf(t->easy, t->url);
  HttpOrigin origin = http_.IsHub(t->url) ? HttpOrigin::kHub : HttpOrigin::kCdn;
  switch (Classify(resp.status, code, origin)) {
    case HttpOutcome::kRedirect: {
      std::string loc = resp.Header("location");
      std::string next = loc.empty() ? "" : ResolveLocation(t->url, loc);
      if (next.empty())
        return Status::Unavailable("downloading " + what + ": HTTP " + std::to_string(resp.status) +
                                   " with an unusable Location '" + loc + "'");
      if (!http_.IsHub(next)) {
        f->url = next;  // another origin (the CDN): where the bytes are, fetched without token
        break;
      }
      // The Hub sends us elsewhere on itself (a renamed repo, /api/resolve-cache): ask there.
      // A redirect is no failure: the same attempt goes on, the hops are counted.
      if (++f->redirects > kMaxRedirects)
        return Status::Unavailable("downloading " + what + ": more than " +
                                   std::to_string(kMaxRedirects) + " redirects");
      f->resolve_url = next;
      Schedule(f, -1, 0, t->attempt);
      return Status::Ok();
    }
    case HttpOutcome::kOk:
      f->url = t->url;
      break;
    case HttpOutcome::kRetryable:
    case HttpOutcome::kRateLimited:
      return Retry(f, -1,
                   code != CURLE_OK ? curl_easy_strerror(code)
                                    : HubError(resp, what, !opt_.token.empty()).message(),
                   RetryAfterMs(resp), t->attempt);
    default:
      if (code != CURLE_OK)
        return Status::Unavailable("downloading " + what + ": " + t->url + ": " +
                                   curl_easy_strerror(code));
      return HubError(resp, "downloading " + what, !opt_.token.empty());
  }
  // The metadata the Hub gives must agree with its listing: the blob's name and its size.
  bool linked = !resp.Header("x-linked-etag").empty();
  std::string etag_field = linked ? "X-Linked-Etag" : "ETag";
  std::string etag = NormalizeEtag(resp.Header(linked ? "x-linked-etag" : "etag"));
  // A redirect's own ETag (to the CDN) is not the blob's: only X-Linked-Etag counts there.
  if ((linked || resp.status == 200) && !etag.empty() && etag != f->entry.etag())
    return Status::Unavailable(what + ": the Hub's " + etag_field + " '" + etag.substr(0, 80) +
                               "' is not the " + (f->entry.is_lfs() ? "sha256 " : "git sha1 ") +
                               f->entry.etag() + " its listing gave; nothing was written");
  std::string size_field = "X-Linked-Size";
  std::string size = resp.Header("x-linked-size");
  if (size.empty() && resp.status == 200) {
    size_field = "Content-Length";
    size = resp.Header("content-length");
  }
  if (!size.empty()) {
    Result<uint64_t> said = ParseSizeHeader(size);
    if (!said.ok())
      return Status::Unavailable(what + ": the Hub's " + size_field +
                                 " header: " + said.status().message() + "; nothing was written");
    if (*said != f->entry.size)
      return Status::Unavailable(what + ": the Hub says " + size + " bytes, its listing said " +
                                 std::to_string(f->entry.size));
  }
  f->resolved = true;
  return Status::Ok();
}

void Downloader::SwitchToOneStream(FileJob* f, Transfer* except) {
  for (auto& tr : active_)
    if (tr->file == f && tr.get() != except) tr->cancelled = true;
  f->single_stream = true;
  f->blob.state.Restart();
}

Status Downloader::OnChunkDone(Transfer* t, CURLcode code) {
  FileJob* f = t->file;
  ResumeState& s = f->blob.state;
  std::string what = What(f);
  int chunk = t->chunk;
  FlushTransfer(t);  // a refused write shows as kDiskWrite below
  auto back_to_pending = [&] {
    if (f->single_stream) {
      std::fill(s.chunks.begin(), s.chunks.end(), ChunkState::kPending);
    } else {
      s.chunks[static_cast<size_t>(chunk)] = ChunkState::kPending;
    }
  };
  stats_->bytes_fetched += t->Fetched();
  HttpOutcome outcome = HttpOutcome::kRetryable;
  switch (t->failure) {
    case TransferFailure::kDiskWrite:
      back_to_pending();
      return Status::IoError("downloading " + what + ": " + FailureText(*t) + " in " +
                             layout_.IncompletePath(f->entry.etag()) +
                             "; the partial file is kept and the next run resumes it");
    case TransferFailure::kRangeIgnored:
      // A server that will not do ranges: take the whole file in one stream instead.
      SwitchToOneStream(f, t);
      return Retry(f, 0, FailureText(*t), 0, t->attempt);
    case TransferFailure::kBadContentRange:
    case TransferFailure::kTooLong:
      break;  // a confused answer: retried
    case TransferFailure::kNone:
      outcome = Classify(ResponseStatus(t->easy), code,
                         http_.IsHub(t->url) ? HttpOrigin::kHub : HttpOrigin::kCdn);
      break;
  }
  bool complete = outcome == HttpOutcome::kOk && (t->pos == t->end + 1 || f->entry.size == 0);
  if (!complete) {
    HttpResponse resp = AnswerOf(t->easy, t->url);
    switch (outcome) {
      case HttpOutcome::kUrlExpired:
        // An expired CDN URL: resolve again, then fetch what is missing.
        back_to_pending();
        if (t->url != f->url) return Status::Ok();  // already replaced: the chunk goes again
        f->resolved = false;
        f->url.clear();
        if (++f->cdn_refusals >= policy_.attempts)
          return Status::Unavailable("downloading " + what +
                                     ": the CDN refused every URL the Hub gave (HTTP " +
                                     std::to_string(resp.status) + ")");
        if (!f->resolving) {
          std::uniform_real_distribution<double> unit(0.0, 1.0);
          Schedule(f, -1, policy_.DelayMs(f->cdn_refusals, 0, unit(rng_)), 1);
        }
        return Status::Ok();
      case HttpOutcome::kOk:  // 2xx, yet short
      case HttpOutcome::kRetryable:
      case HttpOutcome::kRateLimited:
        break;
      default:
        back_to_pending();
        if (code != CURLE_OK)
          return Status::Unavailable("downloading " + what + ": " + t->url + ": " +
                                     curl_easy_strerror(code));
        return HubError(resp, "downloading " + what, !opt_.token.empty());
    }
    // Keep what arrived: the rest of this chunk is fetched from where it stopped.
    back_to_pending();
    std::string why = t->failure != TransferFailure::kNone ? FailureText(*t)
                      : code != CURLE_OK                   ? curl_easy_strerror(code)
                                                           : "HTTP " + std::to_string(resp.status);
    if (!f->single_stream && !s.chunked && t->pos > t->start) {
      s.resume_at = t->pos;  // one-stream files resume from the last byte written
      f->blob.hasher->Advance(t->pos);
    }
    if (!f->single_stream && s.chunked && !t->error_body)
      s.salvaged[static_cast<size_t>(chunk)] = t->pos - s.ChunkStart(static_cast<size_t>(chunk));
    return Retry(f, chunk, why, RetryAfterMs(resp), t->attempt);
  }
  if (f->single_stream) {
    std::fill(s.chunks.begin(), s.chunks.end(), ChunkState::kDone);
  } else {
    s.chunks[static_cast<size_t>(chunk)] = ChunkState::kDone;
  }
  done_bytes_ += t->Fetched();
  f->cdn_refusals = 0;
  if (s.chunked && !f->single_stream) SaveChunkMap(s, layout_.ChunkMapPath(f->entry.etag()));
  f->blob.hasher->Advance(f->single_stream || !s.chunked ? t->pos : s.Watermark());
  return Status::Ok();
}

Status Downloader::Finalize(FileJob* f) {
  auto verdict = PublishPartialBlob(layout_, f->entry, repo_, &f->blob);
  if (!verdict.ok()) return verdict.status();
  if (*verdict == BlobVerdict::kRefetch) {
    stats_->retries++;
    f->single_stream = false;
    done_bytes_ -= std::min(done_bytes_, f->entry.size);
    return Status::Ok();
  }
  f->finished = true;
  ++files_done_;
  stats_->files_fetched++;
  return Status::Ok();
}

void Downloader::Progress(bool force) {
  if (!opt_.on_progress) return;
  auto now = clock_.Now();
  if (!force && now - last_progress_ < std::chrono::milliseconds(250)) return;
  last_progress_ = now;
  PullProgress p;
  p.repo_id = repo_;
  p.bytes_total = total_;
  uint64_t inflight = 0;
  for (const auto& t : active_)
    if (!t->head) inflight += t->Fetched();
  p.bytes_done = std::min(total_, done_bytes_ + inflight);
  p.bytes_fetched = stats_->bytes_fetched + inflight;
  p.files_done = files_done_;
  p.files_total = static_cast<int>(files_.size());
  p.seconds = std::chrono::duration<double>(now - started_).count();
  opt_.on_progress(p);
}

Status Downloader::StartDue() {
  auto now = clock_.Now();
  for (auto it = delayed_.begin(); it != delayed_.end();) {
    if (it->at > now || static_cast<int>(active_.size()) >= opt_.connections) {
      ++it;
      continue;
    }
    FileJob* f = it->file;
    Delayed due = *it;
    it = delayed_.erase(it);
    if (due.chunk < 0 || !f->resolved) {
      if (!f->resolving) BERTH_RETURN_IF_ERROR(StartHead(f, due.attempt));
    } else if (f->blob.state.chunks[static_cast<size_t>(due.chunk)] == ChunkState::kPending) {
      BERTH_RETURN_IF_ERROR(StartChunk(f, due.chunk, due.attempt));
    }
  }
  return Status::Ok();
}

Status Downloader::StartNew(size_t* next_prepare) {
  // Big files first: their chunks keep every connection busy while small files fill gaps.
  for (size_t i = 0; i < files_.size() && static_cast<int>(active_.size()) < opt_.connections;
       ++i) {
    FileJob* f = files_[i].get();
    if (i >= *next_prepare) {
      BERTH_RETURN_IF_ERROR(Prepare(f));
      *next_prepare = i + 1;
    }
    if (f->finished) continue;
    if (std::any_of(delayed_.begin(), delayed_.end(),
                    [f](const Delayed& d) { return d.file == f; }))
      continue;
    if (!f->resolved) {
      if (!f->resolving) BERTH_RETURN_IF_ERROR(StartHead(f, 1));
      continue;
    }
    std::vector<ChunkState>& chunks = f->blob.state.chunks;
    if (f->single_stream) {
      if (f->in_flight == 0 && !chunks.empty() && chunks[0] == ChunkState::kPending)
        BERTH_RETURN_IF_ERROR(StartChunk(f, 0, 1));
      continue;
    }
    for (size_t c = 0; c < chunks.size() && static_cast<int>(active_.size()) < opt_.connections;
         ++c)
      if (chunks[c] == ChunkState::kPending)
        BERTH_RETURN_IF_ERROR(StartChunk(f, static_cast<int>(c), 1));
    if (f->entry.size == 0 && f->in_flight == 0 && chunks.empty())
      BERTH_RETURN_IF_ERROR(Finalize(f));
  }
  return Status::Ok();
}

Status Downloader::FinalizeReady(bool* all_done) {
  // Files whose every chunk is done and hashed: verify and publish the blob.
  *all_done = true;
  for (auto& f : files_) {
    if (f->finished) continue;
    *all_done = false;
    if (f->blob.fd >= 0 && f->in_flight == 0 && f->blob.state.AllDone() && f->blob.hasher &&
        f->blob.hasher->done())
      BERTH_RETURN_IF_ERROR(Finalize(f.get()));
  }
  return Status::Ok();
}

bool Downloader::WaitingForHash() const {
  return std::any_of(files_.begin(), files_.end(), [](const auto& f) {
    return !f->finished && f->in_flight == 0 && f->blob.hasher && !f->blob.hasher->done();
  });
}

Status Downloader::Wait() {
  bool hashing = WaitingForHash();
  if (active_.empty() && !delayed_.empty()) {
    // Nothing in flight, only backoffs to wait out: on the clock, a short step at a time so
    // that a cancel, or a hash that ends, is seen.
    Clock::TimePoint due = delayed_.front().at;
    for (const auto& d : delayed_) due = std::min(due, d.at);
    auto step = std::chrono::milliseconds(hashing ? 20 : 100);
    clock_.SleepUntil(std::min(due, clock_.Now() + step));
    return Status::Ok();
  }
  int timeout_ms = hashing || !delayed_.empty() ? 20 : 100;
  if (CURLMcode code = curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr); code != CURLM_OK)
    return MultiError(repo_, "curl_multi_poll", code);
  return Status::Ok();
}

Status Downloader::Run(const std::vector<HubFileEntry>& entries) {
  multi_ = curl_multi_init();
  if (!multi_) return Status::Unavailable("downloading " + repo_ + ": curl_multi_init failed");
  if (CURLMcode code = curl_multi_setopt(multi_, CURLMOPT_MAX_TOTAL_CONNECTIONS,
                                         static_cast<long>(opt_.connections));
      code != CURLM_OK)
    return MultiError(repo_, "curl_multi_setopt", code);
  for (const auto& e : entries) {
    auto f = std::make_unique<FileJob>();
    f->entry = e;
    f->resolve_url =
        opt_.endpoint + "/" + repo_ + "/resolve/" + commit_ + "/" + UrlEncode(e.path, true);
    total_ += e.size;
    files_.push_back(std::move(f));
  }
  std::stable_sort(files_.begin(), files_.end(),
                   [](const auto& a, const auto& b) { return a->entry.size > b->entry.size; });
  size_t next_prepare = 0;
  for (;;) {
    BERTH_RETURN_IF_ERROR(StartDue());
    BERTH_RETURN_IF_ERROR(StartNew(&next_prepare));
    bool all_done = false;
    BERTH_RETURN_IF_ERROR(FinalizeReady(&all_done));
    if (all_done && next_prepare >= files_.size()) break;
    // Cancelled transfers (a file switched to one stream) leave now.
    for (size_t i = active_.size(); i-- > 0;) {
      if (!active_[i]->cancelled) continue;
      active_[i]->file->in_flight--;
      Remove(active_[i].get());
    }
    int running = 0;
    if (CURLMcode code = curl_multi_perform(multi_, &running); code != CURLM_OK)
      return MultiError(repo_, "curl_multi_perform", code);
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Transfer* t = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
      if (!t ||
          std::none_of(active_.begin(), active_.end(), [t](const auto& p) { return p.get() == t; }))
        return Status::Internal("downloading " + repo_ +
                                ": curl reported a transfer berth did not start");
      CURLcode code = msg->data.result;
      Status s = Status::Ok();
      if (t->cancelled) {
        t->file->in_flight--;
      } else {
        s = OnDone(t, code);
      }
      Remove(t);
      if (!s.ok()) return s;
    }
    Progress(false);
    if (opt_.cancel && opt_.cancel->load())
      return Status::Unavailable("download of " + repo_ +
                                 " interrupted; the partial files are kept "
                                 "and the next run resumes them");
    BERTH_RETURN_IF_ERROR(Wait());
  }
  Progress(true);
  return Status::Ok();
}

}  // namespace

Status DownloadBlobs(HubHttp& http, const CacheLayout& layout, const std::string& repo_id,
                     const std::string& commit, const std::vector<HubFileEntry>& files,
                     DownloadStats* stats) {
  // The names come from the Hub: each must be a blob's name before it names a file.
  for (const auto& f : files) {
    if (!IsSafeRepoPath(f.path) || f.size > kMaxRepoFileBytes ||
        !(f.is_lfs() ? IsSha256Name(f.etag()) : IsGitSha1Name(f.etag())))
      return Status::InvalidArgument(repo_id + ": file '" + f.path.substr(0, 200) + "' has blob '" +
                                     f.etag().substr(0, 80) + "' and size " +
                                     std::to_string(f.size) +
                                     ", not a safe path, a sha256 or git sha1 and a size of at "
                                     "most 2^50; nothing was written");
  }
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
