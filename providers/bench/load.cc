// The load generator's event loop: libcurl multi, one easy handle per stream, reused for the
// stream's next request (and so its connection). CURLcode becomes an operator's sentence here.
// It records when each request was sent and when each of its content chunks arrived;
// FigureBuilder (figures.h) turns those into the figures.
#include "providers/bench/load.h"

#include <curl/curl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "core/json_text.h"
#include "core/untrusted_text.h"
#include "providers/bench/sse.h"
#include "providers/http/curl_easy.h"
#include "providers/http/curl_global.h"

namespace berth {
namespace {

constexpr size_t kErrorBodyBytes = 4096;

double Ms(Clock::TimePoint::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

/// A made-up prompt of `words` words, different for every request (so a server's prefix cache
/// does not answer it from the last one).
std::string MadeUpPrompt(uint64_t request, int words) {
  static constexpr const char* kWords[] = {
      "river",   "stone",   "light",  "north",  "garden", "window", "silver", "market",
      "engine",  "paper",   "cloud",  "forest", "bridge", "winter", "signal", "harbor",
      "lantern", "copper",  "meadow", "tower",  "velvet", "orbit",  "canyon", "ember",
      "falcon",  "glacier", "island", "jungle", "kettle", "ladder", "marble", "nectar"};
  std::string p = "Request " + std::to_string(request) + ":";
  uint64_t x = request * 6364136223846793005ULL + 1442695040888963407ULL;
  for (int i = 1; i < words; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    p += ' ';
    p += kWords[(x >> 33) % std::size(kWords)];
  }
  return p;
}

std::string RequestBody(const LoadSpec& spec, uint64_t request) {
  std::string prompt =
      spec.prompt.empty() ? MadeUpPrompt(request, spec.prompt_tokens) : spec.prompt;
  nlohmann::json j = {{"model", spec.model},
                      {"max_tokens", spec.max_tokens},
                      {"stream", true},
                      {"stream_options", {{"include_usage", true}}}};
  if (spec.ignore_eos) j["ignore_eos"] = true;
  if (spec.chat)
    j["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
  else
    j["prompt"] = prompt;
  return DumpJson(j);
}

/// The message of an OpenAI-style error answer, or a snippet of whatever came.
std::string ErrorAnswer(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    const nlohmann::json* m = nullptr;
    if (auto it = j.find("message"); it != j.end() && it->is_string()) m = &*it;
    if (auto e = j.find("error"); !m && e != j.end() && e->is_object())
      if (auto it = e->find("message"); it != e->end() && it->is_string()) m = &*it;
    if (auto e = j.find("error"); !m && e != j.end() && e->is_string()) m = &*e;
    if (m) return Excerpt(m->get_ref<const std::string&>(), 300);
  }
  if (body.empty()) return "(empty answer)";
  std::string out = "'";  // appended: g++ 12 -O3 warns falsely (-Wrestrict) of "'" + string&&
  out += Excerpt(body, 200);
  out += '\'';
  return out;
}

/// The sockets libcurl asks to watch, in one epoll set, and libcurl's one timer: only the
/// sockets that are ready are handed to libcurl (curl_multi_socket_action). curl_multi_poll and
/// curl_multi_perform visited every stream's socket and handle on each wake-up, and at 128
/// paced streams a wake-up came for nearly every token: that was most of the generator's CPU.
class SocketLoop {
 public:
  SocketLoop(CURLM* multi, Clock* clock)
      : multi_(multi), clock_(clock), epfd_(epoll_create1(EPOLL_CLOEXEC)) {
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &SocketLoop::OnSocket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &SocketLoop::OnTimer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  }
  ~SocketLoop() {
    if (epfd_ >= 0) close(epfd_);
  }
  SocketLoop(const SocketLoop&) = delete;
  SocketLoop& operator=(const SocketLoop&) = delete;
  /// Why the loop cannot run; "" when it can.
  std::string error() const {
    return epfd_ >= 0 ? "" : std::string("epoll_create1 failed: ") + std::strerror(errno);
  }

  /// Waits until a socket is ready, libcurl's timer is due or `wake` (at most 50 ms), and hands
  /// libcurl what happened.
  void Step(Clock::TimePoint wake) {
    Clock::TimePoint now = clock_->Now();
    if (timer_ && *timer_ < wake) wake = *timer_;
    long long wait =
        wake <= now ? 0 : std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    epoll_event events[64];
    int n = epoll_wait(epfd_, events, 64, static_cast<int>(std::min(wait, 50LL)));
    int running = 0;
    for (int i = 0; i < n; ++i) {
      uint32_t e = events[i].events;
      int flags = ((e & (EPOLLIN | EPOLLHUP)) ? CURL_CSELECT_IN : 0) |
                  ((e & EPOLLOUT) ? CURL_CSELECT_OUT : 0) | ((e & EPOLLERR) ? CURL_CSELECT_ERR : 0);
      curl_multi_socket_action(multi_, events[i].data.fd, flags, &running);
    }
    if (timer_ && clock_->Now() >= *timer_) {
      timer_.reset();
      curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
    }
  }

 private:
  static int OnSocket(CURL*, curl_socket_t fd, int what, void* self, void*) {
    auto* loop = static_cast<SocketLoop*>(self);
    if (what == CURL_POLL_REMOVE) {
      epoll_ctl(loop->epfd_, EPOLL_CTL_DEL, fd, nullptr);  // EBADF once closed: nothing to do
      return 0;
    }
    epoll_event ev{};
    ev.data.fd = fd;
    ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u);
    if (epoll_ctl(loop->epfd_, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT)
      epoll_ctl(loop->epfd_, EPOLL_CTL_ADD, fd, &ev);
    return 0;
  }
  static int OnTimer(CURLM*, long timeout_ms, void* self) {
    auto* loop = static_cast<SocketLoop*>(self);
    if (timeout_ms < 0)
      loop->timer_.reset();
    else
      loop->timer_ = loop->clock_->Now() + std::chrono::milliseconds(timeout_ms);
    return 0;
  }

  CURLM* multi_;
  Clock* clock_;
  int epfd_;
  std::optional<Clock::TimePoint> timer_;  // when libcurl wants CURL_SOCKET_TIMEOUT
};

struct Run;

/// One of the streams: its handle and the request it has in flight.
struct Stream {
  Run* run = nullptr;
  CURL* easy = nullptr;
  bool busy = false;  // a request is attached to the multi handle
  std::string body;
  SseParser parser;
  RequestTiming timing;  // when the request in flight was sent, when its content came
  bool done = false;
  bool has_usage = false;
  uint64_t deltas = 0;         // content deltas within the measured time
  uint64_t content_bytes = 0;  // their bytes of text
  uint64_t usage_tokens = 0;
  long status = 0;
  std::string fail;        // why this stream's request broke off (set before aborting it)
  std::string error_body;  // the answer of an error status, bounded
  char errbuf[CURL_ERROR_SIZE] = {0};
};

struct Run {
  const LoadSpec& spec;
  Clock* clock;
  CURLM* multi = nullptr;
  SocketLoop* loop = nullptr;
  std::string url;
  /// The measured time's start: the figures' times are milliseconds from here.
  Clock::TimePoint origin{};
  /// No content that arrives after it counts (the end of a measured duration).
  Clock::TimePoint deadline = Clock::TimePoint::max();
  bool measuring = false;  // false during the warm-up: nothing it does reaches the figures
  size_t max_chunk_times = 0;
  uint64_t next_request = 0;
  uint64_t warmup_errors = 0;
  LoadFigures result;
  FigureBuilder figures;
  Run(const LoadSpec& s, Clock* c) : spec(s), clock(c), figures(s) {}

  void Error(const std::string& what) {
    if (measuring)
      ++result.errors;
    else
      ++warmup_errors;
    if (result.first_error.empty())
      result.first_error = (measuring ? "POST " : "(warm-up) POST ") + url + ": " + what;
  }
  bool TooManyErrors() const {
    return spec.max_errors > 0 &&
           result.errors + warmup_errors >= static_cast<uint64_t>(spec.max_errors);
  }
};

bool OnEvent(Stream* s, std::string_view data, Clock::TimePoint now) {
  if (s->done) return true;  // anything after [DONE] is not ours to read
  StreamEvent e = InterpretEvent(data);
  switch (e.kind) {
    case StreamEvent::Kind::kDone:
      s->done = true;
      return true;
    case StreamEvent::Kind::kError:
    case StreamEvent::Kind::kMalformed:
      s->fail = e.error;
      return false;
    case StreamEvent::Kind::kChunk:
      break;
  }
  if (e.has_usage) {
    s->has_usage = true;
    s->usage_tokens = e.completion_tokens;
  }
  Run* run = s->run;
  if (e.content_deltas == 0 || now >= run->deadline) return true;
  s->deltas += e.content_deltas;
  s->content_bytes += e.content_bytes;
  // A server that sends far more chunks than the request asked for tokens does not grow the
  // list without bound: beyond the cap, the last time is overwritten (E2E stays right; the
  // gaps in between are lost).
  std::vector<double>& times = s->timing.chunk_ms;
  double at = Ms(now - run->origin);
  if (times.size() < run->max_chunk_times)
    times.push_back(at);
  else
    times.back() = at;
  return true;
}

size_t OnData(char* data, size_t size, size_t n, void* user) {
  auto* s = static_cast<Stream*>(user);
  size_t len = size * n;
  if (s->status == 0) s->status = ResponseStatus(s->easy);
  if (s->status != 200) {
    size_t room = kErrorBodyBytes - std::min(kErrorBodyBytes, s->error_body.size());
    s->error_body.append(data, std::min(room, len));
    return len;
  }
  Clock::TimePoint now = s->run->clock->Now();  // one arrival time for the whole chunk
  bool ok = s->parser.Feed(std::string_view(data, len),
                           [s, now](std::string_view event) { return OnEvent(s, event, now); });
  if (!ok) {
    if (s->fail.empty()) s->fail = s->parser.error() + " (the stream is cut off there)";
    return CURL_WRITEFUNC_ERROR;
  }
  return len;
}

void Start(Run* run, Stream* s) {
  uint64_t request = run->next_request++;
  s->body = RequestBody(run->spec, request);
  s->parser = SseParser(run->spec.max_event_bytes);
  s->timing.chunk_ms.clear();
  s->timing.tokens = 0;
  s->done = s->has_usage = false;
  s->deltas = s->content_bytes = s->usage_tokens = 0;
  s->status = 0;
  s->fail.clear();
  s->error_body.clear();
  s->errbuf[0] = 0;
  curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->body.c_str());
  curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(s->body.size()));
  s->timing.start_ms = Ms(run->clock->Now() - run->origin);
  s->busy = true;
  curl_multi_add_handle(run->multi, s->easy);
}

/// The output tokens a request is credited with: what arrived, not what the server claims.
/// `usage` says how many tokens the text was (a chunk may hold several), but it is believed
/// only between the content chunks that arrived and the smaller of the request's max_tokens and
/// the bytes of text that arrived (a token is at least one byte of text): a usage of 2^64-1
/// passed a floor of 1e8 tok/s once. No request is credited with more than it asked for.
uint64_t CountedTokens(const Stream& s, const LoadSpec& spec) {
  uint64_t asked = static_cast<uint64_t>(spec.max_tokens);
  uint64_t arrived = std::min(s.deltas, asked);
  if (!s.has_usage) return arrived;
  uint64_t most = std::max(arrived, std::min(asked, s.content_bytes));
  return std::clamp(s.usage_tokens, arrived, most);
}

/// Detaches a finished request and folds it into the figures (when measuring).
void Finish(Run* run, Stream* s, CURLcode code) {
  curl_multi_remove_handle(run->multi, s->easy);
  s->busy = false;
  s->timing.end = RequestTiming::End::kFailed;
  if (!s->fail.empty()) {
    run->Error(s->fail);
  } else if (code != CURLE_OK) {
    std::string what = s->errbuf[0] ? s->errbuf : curl_easy_strerror(code);
    if (code == CURLE_COULDNT_CONNECT)
      what = "connection refused (" + what + "; is the service running, and on this port?)";
    else if (code == CURLE_OPERATION_TIMEDOUT)
      what = "timed out (" + what + "; the request timeout is " +
             std::to_string(run->spec.request_timeout.count()) + " ms)";
    run->Error(what);
  } else if (s->status != 200) {
    run->Error("HTTP " + std::to_string(s->status) + ": " + ErrorAnswer(s->error_body));
  } else if (!s->done) {
    run->Error("the stream ended without 'data: [DONE]' (the server closed it mid-answer)");
  } else {
    s->timing.end = RequestTiming::End::kFinished;
    s->timing.tokens = CountedTokens(*s, run->spec);
  }
  if (run->measuring)
    run->figures.Add(s->timing);
  else
    ++run->result.warmup_requests;
}

/// Detaches a request still streaming when its phase ends: measured, it is credited the
/// content chunks it got within the measured time (at most its max_tokens).
void Cut(Run* run, Stream* s) {
  curl_multi_remove_handle(run->multi, s->easy);
  s->busy = false;
  if (!run->measuring) {
    ++run->result.warmup_requests;
    return;
  }
  ++run->result.cancelled;
  s->timing.end = RequestTiming::End::kCut;
  s->timing.tokens = std::min(s->deltas, static_cast<uint64_t>(run->spec.max_tokens));
  run->figures.Add(s->timing);
}

/// Arrival times of a phase's requests: every free stream at once (no rate), or a Poisson
/// process: a fixed schedule of `requests` (as vLLM draws it) or gaps drawn one at a time.
class Arrivals {
 public:
  Arrivals(double rate, uint64_t requests, uint64_t seed)
      : rate_(rate), poisson_(rate > 0 ? rate : 1, seed) {
    if (rate_ <= 0) return;
    if (requests > 0) schedule_ = ArrivalSchedule(requests, rate, seed);
    next_s_ = schedule_.empty() ? poisson_.NextGapSeconds() : schedule_[0];
  }
  bool paced() const { return rate_ > 0; }
  /// Seconds after the phase's start when the next request is due (after `due` were).
  double next_seconds() const { return next_s_; }
  void Advance(uint64_t due) {
    if (schedule_.empty())
      next_s_ += poisson_.NextGapSeconds();
    else
      next_s_ = due < schedule_.size() ? schedule_[due] : HUGE_VAL;
  }

 private:
  double rate_;
  PoissonArrivals poisson_;
  std::vector<double> schedule_;
  double next_s_ = 0;
};

/// One phase (a warm-up or the measured run): `requests` requests in all (0: no limit) until
/// `deadline`, at `rate` per second (0: each free stream sends at once), then the requests
/// still in flight are cut. Returns false when it was stopped (`stop`, or too many errors).
bool RunPhase(Run* run, std::vector<Stream>* streams, uint64_t requests, Clock::TimePoint deadline,
              double rate, const std::atomic<bool>* stop) {
  std::vector<Stream*> idle;
  for (auto& s : *streams) idle.push_back(&s);
  Arrivals arrivals(rate, requests, run->spec.seed);
  Clock::TimePoint phase_start = run->clock->Now();
  auto at = [&](double seconds) {
    return phase_start + std::chrono::duration_cast<Clock::TimePoint::duration>(
                             std::chrono::duration<double>(std::min(seconds, 1e9)));
  };
  uint64_t due = 0, sent = 0, ended = 0;
  bool stopped = false;
  while (true) {
    Clock::TimePoint now = run->clock->Now();
    if (arrivals.paced()) {
      while ((requests == 0 || due < requests) && at(arrivals.next_seconds()) <= now)
        arrivals.Advance(++due);
    } else {
      due = requests == 0 ? sent + idle.size() : requests;
    }
    while (!idle.empty() && sent < due) {
      Start(run, idle.back());
      idle.pop_back();
      ++sent;
    }
    Clock::TimePoint wake = std::min(deadline, now + std::chrono::milliseconds(50));
    if (arrivals.paced() && (requests == 0 || due < requests))
      wake = std::min(wake, at(arrivals.next_seconds()));
    run->loop->Step(wake);
    now = run->clock->Now();
    // What ends after the measured time is not part of it: requests still attached then are
    // cut with the tokens they had (OnEvent counts none after the deadline).
    if (now >= deadline) break;
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(run->multi, &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Stream* s = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &s);
      Finish(run, s, msg->data.result);
      idle.push_back(s);
      ++ended;
    }
    if ((stop && stop->load()) || run->TooManyErrors()) {
      stopped = true;
      break;
    }
    if (requests > 0 && ended >= requests) break;
  }
  for (auto& s : *streams)
    if (s.busy) Cut(run, &s);
  return !stopped;
}

}  // namespace

Result<LoadFigures> RunLoad(const LoadSpec& spec, const std::atomic<bool>* stop, Clock* clock) {
  if (spec.port <= 0 || spec.port > 65535)
    return Status::InvalidArgument("the load generator needs a port, got " +
                                   std::to_string(spec.port));
  if (spec.model.empty())
    return Status::InvalidArgument("the load generator needs the served model name");
  if (spec.concurrency < 1 || spec.concurrency > 10000)
    return Status::InvalidArgument("concurrency must be 1 to 10000, got " +
                                   std::to_string(spec.concurrency));
  if (spec.max_tokens < 1 || spec.prompt_tokens < 1)
    return Status::InvalidArgument("max tokens and prompt tokens must be at least 1");
  if (spec.num_prompts == 0 && spec.duration.count() <= 0)
    return Status::InvalidArgument("the duration must be positive");
  if (!std::isfinite(spec.request_rate) || spec.request_rate < 0)
    return Status::InvalidArgument(
        "the request rate must be a number of requests per second "
        ">= 0 (0: as fast as the concurrency allows)");
  for (double limit : {spec.goodput_ttft_ms, spec.goodput_tpot_ms, spec.goodput_e2e_ms})
    if (!std::isfinite(limit) || limit < 0)
      return Status::InvalidArgument("goodput limits must be milliseconds >= 0 (0: not given)");
  if (spec.warmup_duration.count() < 0)
    return Status::InvalidArgument("the warm-up duration must not be negative");
  CurlGlobalInit();
  Run run(spec, clock ? clock : &RealClock());
  run.result.concurrency = spec.concurrency;
  run.max_chunk_times = 4 * static_cast<size_t>(spec.max_tokens) + 64;
  std::string host = spec.host.find(':') != std::string::npos ? "[" + spec.host + "]" : spec.host;
  run.url = "http://" + host + ":" + std::to_string(spec.port) +
            (spec.chat ? "/v1/chat/completions" : "/v1/completions");

  std::unique_ptr<CURLM, decltype(&curl_multi_cleanup)> multi(curl_multi_init(),
                                                              &curl_multi_cleanup);
  if (!multi) return Status::Internal("cannot start an HTTP client (curl_multi_init failed)");
  run.multi = multi.get();
  SocketLoop loop(multi.get(), run.clock);
  if (std::string e = loop.error(); !e.empty())
    return Status::Internal("cannot start an HTTP client (" + e + ")");
  run.loop = &loop;
  curl_multi_setopt(multi.get(), CURLMOPT_MAXCONNECTS, static_cast<long>(spec.concurrency));
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr,
                                                                      &curl_slist_free_all);
  headers.reset(curl_slist_append(headers.release(), "Content-Type: application/json"));
  headers.reset(curl_slist_append(headers.release(), "Accept: text/event-stream"));
  // No "Expect: 100-continue" for a body over 1 KiB: a round trip per request for nothing.
  headers.reset(curl_slist_append(headers.release(), "Expect:"));

  std::vector<Stream> streams(static_cast<size_t>(spec.concurrency));
  auto cleanup = [&] {
    for (auto& s : streams) {
      if (!s.easy) continue;
      if (s.busy) curl_multi_remove_handle(multi.get(), s.easy);
      curl_easy_cleanup(s.easy);
      s.easy = nullptr;
    }
  };
  for (auto& s : streams) {
    s.run = &run;
    s.easy = curl_easy_init();
    if (!s.easy) {
      cleanup();
      return Status::Internal("cannot start an HTTP client (curl_easy_init failed)");
    }
    CURL* e = s.easy;
    curl_easy_setopt(e, CURLOPT_URL, run.url.c_str());
    RestrictToHttp(e);
    curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(spec.connect_timeout.count()));
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(spec.request_timeout.count()));
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s.errbuf);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &OnData);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(e, CURLOPT_PRIVATE, &s);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "berth-bench/" BERTH_VERSION);
  }

  // The warm-up: its requests run at the measured concurrency, without a rate (as vLLM's), and
  // reach no figure.
  bool go_on = true;
  if (spec.warmup_requests > 0)
    go_on = RunPhase(&run, &streams, spec.warmup_requests, Clock::TimePoint::max(), 0, stop);
  if (go_on && spec.warmup_duration.count() > 0)
    go_on = RunPhase(&run, &streams, 0, run.clock->Now() + spec.warmup_duration, 0, stop);

  run.measuring = true;
  run.origin = run.clock->Now();
  Clock::TimePoint end = run.origin;
  if (go_on) {
    if (spec.num_prompts == 0) run.deadline = run.origin + spec.duration;
    bool whole = RunPhase(&run, &streams, spec.num_prompts, run.deadline, spec.request_rate, stop);
    // A closed loop measures its duration; a fixed number of requests, until the last ended.
    end = whole && spec.num_prompts == 0 ? run.deadline : run.clock->Now();
  }
  cleanup();
  run.figures.Fill(std::chrono::duration<double>(end - run.origin).count(), &run.result);
  return run.result;
}

}  // namespace berth
