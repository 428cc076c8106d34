// The load generator's event loop: one thread, io_uring (uring.h) or epoll, a non-blocking
// socket per stream kept alive for the stream's next request, HTTP/1.1 read by
// HttpResponseReader (libcurl followed every read with a poll(2) of the socket: at a token per
// read, a third of the system calls).
// errno becomes an operator's sentence here.
// It records when each request was sent and when each of its content chunks arrived;
// FigureBuilder (figures.h) turns those into the figures.
#include "providers/bench/load.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/json_text.h"
#include "core/untrusted_text.h"
#include "providers/bench/http_response.h"
#include "providers/bench/sse.h"
#include "providers/bench/uring.h"

namespace berth {
namespace {

constexpr size_t kErrorBodyBytes = 4096;
constexpr double kMaxServerDecodeMs = 86400.0 * 1000;  // a day

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

struct Run;

/// One of the streams: its connection and the request it has in flight.
struct Stream {
  Run* run = nullptr;
  uint32_t index = 0;  // in the run's streams (an io_uring request's tag says which)
  int fd = -1;
  uint32_t watching = 0;    // the epoll events asked for fd
  uint32_t generation = 0;  // of fd (io_uring): completions tagged with an older one are stale
  bool recv_armed = false;  // io_uring: a multishot recv of fd is in flight
  bool poll_armed = false;  // io_uring: a poll of fd for writability is in flight
  bool connected = false;   // the connection is up (and may carry the next request)
  bool busy = false;        // a request is in flight
  bool over = false;        // it ended; RunPhase folds it in
  bool reused = false;      // sent on a connection that carried a request before
  bool retried = false;     // already sent again on a new connection
  std::string request;      // its bytes
  size_t sent = 0;
  HttpResponseReader http;
  Clock::TimePoint connect_by{}, done_by{};  // the connect and request timeouts
  SseParser parser;
  RequestTiming timing;  // when the request in flight was sent, when its content came
  bool done = false;
  bool has_usage = false;
  uint64_t deltas = 0;         // content deltas within the measured time
  uint64_t content_bytes = 0;  // their bytes of text
  uint64_t usage_tokens = 0;
  bool has_timings = false;  // the server's own account (llama.cpp's timings), the last one
  uint64_t predicted_n = 0;
  double predicted_ms = 0;
  std::string fail;        // why the request failed; "" when it did not
  std::string error_body;  // the answer of an error status, bounded
};

struct Run {
  const LoadSpec& spec;
  Clock* clock;
  int epfd = -1;
  std::unique_ptr<Uring> ring;  // null: epoll
  std::vector<Stream>* streams = nullptr;
  std::string broken;  // why the event loop failed ("" while it works)
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string resolve_error;  // why the host has no address; "" when it has one
  std::string url;
  std::string request_head;  // the request up to its Content-Length value
  /// The measured time's start: the figures' times are milliseconds from here.
  Clock::TimePoint origin{};
  /// No content that arrives after it counts (the end of a measured duration).
  Clock::TimePoint deadline = Clock::TimePoint::max();
  bool measuring = false;  // false during the warm-up: nothing it does reaches the figures
  /// Reads carry the kernel's receive times, and tokens are timed by them (io_uring with
  /// receive times, and the real clock: a fake clock's time has no kernel counterpart).
  bool kernel_times = false;
  size_t max_chunk_times = 0;
  uint64_t next_request = 0;
  uint64_t warmup_errors = 0;
  Clock::TimePoint next_timeout = Clock::TimePoint::max();  // the earliest, or earlier
  std::vector<Stream*> ended;  // requests that ended since RunPhase last looked
  std::vector<char> buffer = std::vector<char>(64 * 1024);
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
  if (e.has_timings) {
    s->has_timings = true;
    s->predicted_n = e.predicted_n;
    s->predicted_ms = e.predicted_ms;
  }
  Run* run = s->run;
  if (e.content_deltas == 0 || now >= run->deadline) return true;
  s->deltas += e.content_deltas;
  s->content_bytes += e.content_bytes;
  // A server that sends far more chunks than the request asked for tokens does not grow the
  // list without bound: beyond the cap, the last time is overwritten (E2E stays right; the
  // gaps in between are lost).
  std::vector<double>& times = s->timing.chunk_ms;
  // A kernel's receive time never precedes the request or the chunk before it (the wall clock
  // it is read on may have been set back since).
  double at = std::max(Ms(now - run->origin), times.empty() ? s->timing.start_ms : times.back());
  if (times.size() < run->max_chunk_times)
    times.push_back(at);
  else
    times.back() = at;
  return true;
}

/// Body bytes of the answer: an error status's are kept (bounded) for its message; a stream's
/// are read as events, all at `now`, the time they were read.
bool OnBody(Stream* s, std::string_view data, Clock::TimePoint now) {
  if (s->http.status() != 200) {
    size_t room = kErrorBodyBytes - std::min(kErrorBodyBytes, s->error_body.size());
    s->error_body.append(data.substr(0, room));
    return true;
  }
  bool ok =
      s->parser.Feed(data, [s, now](std::string_view event) { return OnEvent(s, event, now); });
  if (!ok && s->fail.empty()) s->fail = s->parser.error() + " (the stream is cut off there)";
  if (!ok) s->http.Fail(s->fail);
  return ok;
}

// io_uring tags: the connection's generation, the stream, and what was asked (0 is a
// cancellation's own completion).
constexpr uint64_t kRecvTag = 1, kPollTag = 2;
uint64_t Tag(const Stream& s, uint64_t kind) {
  return (uint64_t{s.generation} << 32) | (uint64_t{s.index} << 2) | kind;
}

/// Asks for what fd should be watched for: EPOLLOUT (connected, or room to send) or EPOLLIN.
/// With io_uring, a connection's multishot recv is armed once it is connected (OnWritable) and
/// reads everything it carries; writability is a one-shot poll.
void Watch(Run* run, Stream* s, uint32_t events) {
  if (run->ring) {
    if (events == EPOLLOUT && !s->poll_armed) {
      run->ring->PollWritable(s->fd, Tag(*s, kPollTag));
      s->poll_armed = true;
    }
    return;
  }
  if (s->watching == events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = s;
  epoll_ctl(run->epfd, s->watching == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, s->fd, &ev);
  s->watching = events;
}

void CloseConnection(Run* run, Stream* s) {
  if (s->fd < 0) return;
  if (s->watching != 0) epoll_ctl(run->epfd, EPOLL_CTL_DEL, s->fd, nullptr);
  // io_uring holds the socket while a request on it is in flight: those are cancelled (the
  // next submission carries it), and what they still complete is stale by its generation.
  if (s->recv_armed) run->ring->Cancel(Tag(*s, kRecvTag));
  if (s->poll_armed) run->ring->Cancel(Tag(*s, kPollTag));
  s->recv_armed = s->poll_armed = false;
  ++s->generation;
  close(s->fd);
  s->fd = -1;
  s->watching = 0;
  s->connected = false;
}

/// The request in flight ended: `why` is "" when it ran to its end, else why it failed.
void End(Run* run, Stream* s, std::string why) {
  if (s->over) return;
  s->over = true;
  if (!why.empty() && s->fail.empty()) s->fail = std::move(why);
  if (!s->fail.empty() || !s->http.keep_alive()) CloseConnection(run, s);
  run->ended.push_back(s);
}

/// Opens a new connection for the request in flight (non-blocking: it completes when the
/// socket becomes writable).
void Connect(Run* run, Stream* s) {
  CloseConnection(run, s);
  if (!run->resolve_error.empty()) return End(run, s, run->resolve_error);
  s->fd = socket(run->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->fd < 0) return End(run, s, std::string("cannot open a socket: ") + std::strerror(errno));
  int one = 1;
  setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Each read's receive time, from the kernel (uring.h); a socket that refuses it is timed by
  // its reads.
  if (run->kernel_times) setsockopt(s->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
  s->reused = false;
  s->connect_by = s->run->clock->Now() + run->spec.connect_timeout;
  run->next_timeout = std::min(run->next_timeout, s->connect_by);
  if (connect(s->fd, reinterpret_cast<const sockaddr*>(&run->addr), run->addr_len) != 0 &&
      errno != EINPROGRESS) {
    int e = errno;
    return End(run, s,
               e == ECONNREFUSED ? "connection refused (is the service running, and on this port?)"
                                 : std::string("cannot connect: ") + std::strerror(e));
  }
  Watch(run, s, EPOLLOUT);
}

/// Sends the request in flight again on a new connection: a connection kept alive may have
/// been closed by the server meanwhile (uvicorn closes one idle for 5 s), which shows only as
/// an end without a byte of answer. Once per request.
bool RetryOnNewConnection(Run* run, Stream* s) {
  if (!s->reused || s->retried || s->http.bytes_seen() > 0) return false;
  s->retried = true;
  s->sent = 0;
  Connect(run, s);
  return true;
}

void OnWritable(Run* run, Stream* s) {
  if (!s->connected) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0)
      return End(run, s,
                 err == ECONNREFUSED
                     ? "connection refused (is the service running, and on this port?)"
                     : std::string("cannot connect: ") + std::strerror(err));
    s->connected = true;
    if (run->ring) {
      run->ring->RecvMultishot(s->fd, Tag(*s, kRecvTag));
      s->recv_armed = true;
    }
  }
  while (s->sent < s->request.size()) {
    ssize_t n = send(s->fd, s->request.data() + s->sent, s->request.size() - s->sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EAGAIN) return Watch(run, s, EPOLLOUT);
    if (n < 0) {
      int e = errno;
      if (RetryOnNewConnection(run, s)) return;
      return End(run, s, std::string("cannot send the request: ") + std::strerror(e));
    }
    s->sent += static_cast<size_t>(n);
  }
  Watch(run, s, EPOLLIN);
}

/// What a read of the request in flight's connection gave: `bytes`, or the end of the stream
/// (`error` 0) or an error (errno), all arrived at `now`.
void OnRead(Run* run, Stream* s, std::string_view bytes, int error, Clock::TimePoint now) {
  if (bytes.empty()) {
    if (RetryOnNewConnection(run, s)) return;
    if (error != 0)
      return End(run, s, std::string("the connection broke: ") + std::strerror(error));
    if (s->http.Eof() == HttpResponseReader::State::kComplete) return End(run, s, "");
    return End(run, s, s->http.error());
  }
  auto state =
      s->http.Feed(bytes, [s, now](std::string_view body) { return OnBody(s, body, now); });
  if (state == HttpResponseReader::State::kComplete) return End(run, s, "");
  if (state == HttpResponseReader::State::kFailed) return End(run, s, s->http.error());
}

/// `now`: when epoll_wait returned, the arrival time of everything it reported.
void OnReadable(Run* run, Stream* s, Clock::TimePoint now) {
  ssize_t n = recv(s->fd, run->buffer.data(), run->buffer.size(), 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  OnRead(run, s, std::string_view(run->buffer.data(), n > 0 ? static_cast<size_t>(n) : 0),
         n < 0 ? errno : 0, now);
}

/// A connection kept alive between requests became readable: the server closed it (or sent
/// what nobody asked for). Either way it is not used again.
void OnIdleReadable(Run* run, Stream* s) {
  ssize_t n = recv(s->fd, run->buffer.data(), run->buffer.size(), 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  CloseConnection(run, s);
}

void Start(Run* run, Stream* s) {
  uint64_t request = run->next_request++;
  std::string body = RequestBody(run->spec, request);
  s->request = run->request_head;
  s->request += std::to_string(body.size());
  s->request += "\r\n\r\n";
  s->request += body;
  s->sent = 0;
  s->http = HttpResponseReader();
  s->parser = SseParser(run->spec.max_event_bytes);
  s->timing.chunk_ms.clear();
  s->timing.tokens = 0;
  s->timing.has_server_account = false;
  s->done = s->has_usage = s->has_timings = s->over = s->retried = false;
  s->deltas = s->content_bytes = s->usage_tokens = s->predicted_n = 0;
  s->predicted_ms = 0;
  s->fail.clear();
  s->error_body.clear();
  Clock::TimePoint now = run->clock->Now();
  s->timing.start_ms = Ms(now - run->origin);
  s->done_by = now + run->spec.request_timeout;
  run->next_timeout = std::min(run->next_timeout, s->done_by);
  s->busy = true;
  if (s->connected) {
    s->reused = true;
    OnWritable(run, s);
  } else {
    Connect(run, s);
  }
}

/// Fails the requests whose connect or request timeout has passed; returns the earliest
/// timeout still to come. The streams are looked at only when the earliest timeout known has
/// come (a request started since has a later one): a scan of every stream on each wake-up was
/// 6 % of the generator's CPU at 128 paced streams.
Clock::TimePoint EnforceTimeouts(Run* run, std::vector<Stream>* streams, Clock::TimePoint now) {
  if (now < run->next_timeout) return run->next_timeout;
  Clock::TimePoint next = Clock::TimePoint::max();
  for (auto& s : *streams) {
    if (!s.busy || s.over) continue;
    if (!s.connected && now >= s.connect_by) {
      End(run, &s,
          "connect timed out (the connect timeout is " +
              std::to_string(run->spec.connect_timeout.count()) + " ms)");
    } else if (now >= s.done_by) {
      End(run, &s,
          "timed out (the request timeout is " + std::to_string(run->spec.request_timeout.count()) +
              " ms)");
    } else {
      next = std::min(next, s.connected ? s.done_by : std::min(s.connect_by, s.done_by));
    }
  }
  run->next_timeout = next;
  return next;
}

/// When a read's bytes arrived: the kernel's receive time where it gave one (`now` and
/// `real_now_ns` are the same instant on the steady and the wall clock), else `now`. A receive
/// time in the future or over a minute old (the wall clock was set meanwhile) is not believed.
Clock::TimePoint ArrivedAt(const Run* run, const Uring::Completion& c, Clock::TimePoint now,
                           int64_t real_now_ns) {
  if (!run->kernel_times || c.received_ns < 0) return now;
  int64_t ago = real_now_ns - c.received_ns;
  if (ago < 0 || ago > int64_t{60} * 1000000000) return now;
  return now - std::chrono::nanoseconds(ago);
}

/// An io_uring completion: a read of a connection (or its end), or its writability.
void OnCompletion(Run* run, const Uring::Completion& c, Clock::TimePoint now, int64_t real_now_ns) {
  if (c.tag == 0) return;  // a cancellation's own
  size_t index = static_cast<size_t>((c.tag & 0xffffffffu) >> 2);
  if (index >= run->streams->size()) return;
  Stream* s = &(*run->streams)[index];
  uint32_t generation = static_cast<uint32_t>(c.tag >> 32);
  if (s->fd < 0 || generation != s->generation) return;  // a connection closed since
  if ((c.tag & 3) == kPollTag) {
    s->poll_armed = false;
    if (s->busy && !s->over) OnWritable(run, s);
    return;
  }
  if (!c.more) s->recv_armed = false;
  if (c.res == -ENOBUFS) {
    // Every buffer was in use: nothing was lost (the bytes wait in the socket); read again.
  } else if (!s->busy || s->over) {
    // A connection between requests: the server closed it (or sent what nobody asked for).
    return CloseConnection(run, s);
  } else {
    OnRead(run, s, c.res > 0 ? c.data : std::string_view(), c.res < 0 ? -c.res : 0,
           ArrivedAt(run, c, now, real_now_ns));
    if (c.res <= 0) return;  // the stream's end: the request ended or was sent again
  }
  if (!s->recv_armed && s->fd >= 0 && generation == s->generation) {
    run->ring->RecvMultishot(s->fd, Tag(*s, kRecvTag));
    s->recv_armed = true;
  }
}

/// With io_uring: one system call submits what was queued, waits until `timeout_ns` for a
/// completion, and reads every socket ready; everything read then arrived at the same time,
/// which it returns.
Clock::TimePoint StepRing(Run* run, int64_t timeout_ns) {
  unsigned gather = 1, gather_us = 0;
  if (run->kernel_times) {
    gather = static_cast<unsigned>(std::min<size_t>(run->streams->size(), 4096));
    gather_us = static_cast<unsigned>(std::clamp<int64_t>(run->spec.gather.count(), 0, 100000));
  }
  bool ok = run->ring->SubmitAndWait(timeout_ns, gather, gather_us);
  int e = errno;
  Clock::TimePoint now = run->clock->Now();
  timespec real{};
  clock_gettime(CLOCK_REALTIME, &real);
  int64_t real_now_ns = int64_t{real.tv_sec} * 1000000000 + real.tv_nsec;
  if (!ok) {
    run->broken = std::string("io_uring_enter: ") + std::strerror(e);
    if (run->result.first_error.empty())
      run->result.first_error = "the load generator stopped: " + run->broken;
    return now;
  }
  run->ring->Drain([run, now, real_now_ns](const Uring::Completion& c) {
    OnCompletion(run, c, now, real_now_ns);
  });
  return now;
}

/// Waits until a socket is ready or `wake` (at most 50 ms), and handles what happened. Returns
/// the time it woke: the arrival time of everything it read (`now`: the time before).
Clock::TimePoint Step(Run* run, Clock::TimePoint wake, Clock::TimePoint now) {
  if (run->ring) {
    auto wait = std::min<Clock::TimePoint::duration>(
        wake <= now ? Clock::TimePoint::duration::zero() : wake - now,
        std::chrono::milliseconds(50));
    return StepRing(run, std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count());
  }
  long long wait =
      wake <= now ? 0 : std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
  epoll_event events[256];
  int n = epoll_wait(run->epfd, events, 256, static_cast<int>(std::min(wait, 50LL)));
  now = run->clock->Now();  // one arrival time for everything this wake-up reads
  for (int i = 0; i < n; ++i) {
    auto* s = static_cast<Stream*>(events[i].data.ptr);
    uint32_t e = events[i].events;
    if (!s->busy) {
      OnIdleReadable(run, s);
      continue;
    }
    if (s->over) continue;
    if ((!s->connected || s->sent < s->request.size()) && (e & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
      OnWritable(run, s);
    else if (e & (EPOLLIN | EPOLLERR | EPOLLHUP))
      OnReadable(run, s, now);
  }
  return now;
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

/// Folds a request that ended into the figures (when measuring).
void Finish(Run* run, Stream* s) {
  s->busy = false;
  s->timing.end = RequestTiming::End::kFailed;
  if (!s->fail.empty()) {
    run->Error(s->fail);
  } else if (s->http.status() != 200) {
    run->Error("HTTP " + std::to_string(s->http.status()) + ": " + ErrorAnswer(s->error_body));
  } else if (!s->done) {
    run->Error("the stream ended without 'data: [DONE]' (the server closed it mid-answer)");
  } else {
    s->timing.end = RequestTiming::End::kFinished;
    s->timing.tokens = CountedTokens(*s, run->spec);
    // The server's account is reported beside berth's, never mixed into it; one that claims
    // more tokens than the request asked for (or a day of decode) is not believed.
    s->timing.has_server_account = s->has_timings &&
                                   s->predicted_n <= static_cast<uint64_t>(run->spec.max_tokens) &&
                                   s->predicted_ms <= kMaxServerDecodeMs;
    s->timing.server_tokens = s->timing.has_server_account ? s->predicted_n : 0;
    s->timing.server_decode_ms = s->timing.has_server_account ? s->predicted_ms : 0;
  }
  if (run->measuring)
    run->figures.Add(s->timing);
  else
    ++run->result.warmup_requests;
}

/// Drops a request still streaming when its phase ends (its connection cannot carry another):
/// measured, it is credited the content chunks it got within the measured time (at most its
/// max_tokens).
void Cut(Run* run, Stream* s) {
  CloseConnection(run, s);
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
  Clock::TimePoint now = phase_start;
  while (true) {
    if (arrivals.paced()) {
      while ((requests == 0 || due < requests) && at(arrivals.next_seconds()) <= now)
        arrivals.Advance(++due);
    } else {
      due = requests == 0 ? sent + idle.size() : requests;
    }
    bool started = false;
    while (!idle.empty() && sent < due) {
      Start(run, idle.back());
      idle.pop_back();
      ++sent;
      started = true;
    }
    if (started) now = run->clock->Now();
    Clock::TimePoint wake = std::min(deadline, now + std::chrono::milliseconds(50));
    if (arrivals.paced() && (requests == 0 || due < requests))
      wake = std::min(wake, at(arrivals.next_seconds()));
    wake = std::min(wake, EnforceTimeouts(run, streams, now));
    // (A request that failed to start ended at once.)
    now = run->ended.empty() ? Step(run, wake, now) : run->clock->Now();
    // What ends after the measured time is not part of it: requests still in flight then are
    // cut with the tokens they had (OnEvent counts none after the deadline).
    if (now >= deadline) break;
    for (Stream* s : run->ended) {
      Finish(run, s);
      idle.push_back(s);
      ++ended;
    }
    run->ended.clear();
    if ((stop && stop->load()) || run->TooManyErrors() || !run->broken.empty()) {
      stopped = true;
      break;
    }
    if (requests > 0 && ended >= requests) break;
  }
  run->ended.clear();  // ended at or after the deadline: cut below, as those still streaming
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
  Run run(spec, clock ? clock : &RealClock());
  run.result.concurrency = spec.concurrency;
  run.max_chunk_times = 4 * static_cast<size_t>(spec.max_tokens) + 64;
  std::string host = spec.host.find(':') != std::string::npos ? "[" + spec.host + "]" : spec.host;
  std::string path = spec.chat ? "/v1/chat/completions" : "/v1/completions";
  std::string authority = host + ":" + std::to_string(spec.port);
  run.url = "http://" + authority + path;
  run.request_head = "POST " + path + " HTTP/1.1\r\nHost: " + authority +
                     "\r\nUser-Agent: berth-bench/" BERTH_VERSION
                     "\r\nContent-Type: application/json\r\nAccept: text/event-stream"
                     "\r\nContent-Length: ";
  // The address, once: a name that does not resolve fails every request with the reason.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(spec.host.c_str(), std::to_string(spec.port).c_str(), &hints, &found);
      e != 0 || !found) {
    run.resolve_error = "cannot resolve '" + spec.host + "': " + gai_strerror(e);
  } else {
    std::memcpy(&run.addr, found->ai_addr, found->ai_addrlen);
    run.addr_len = found->ai_addrlen;
  }
  if (found) freeaddrinfo(found);
  run.epfd = epoll_create1(EPOLL_CLOEXEC);
  if (run.epfd < 0)
    return Status::Internal(std::string("cannot start the load generator (epoll_create1: ") +
                            std::strerror(errno) + ")");

  std::vector<Stream> streams(static_cast<size_t>(spec.concurrency));
  for (size_t i = 0; i < streams.size(); ++i) {
    streams[i].run = &run;
    streams[i].index = static_cast<uint32_t>(i);
  }
  run.streams = &streams;
  std::string no_ring;  // why not (epoll reads the streams then)
  if (spec.io_uring) run.ring = Uring::Open(streams.size(), &no_ring, /*receive_times=*/true);
  run.kernel_times =
      run.ring && run.ring->receive_times() && dynamic_cast<SystemClock*>(run.clock) != nullptr;
  auto cleanup = [&] {
    for (auto& s : streams) CloseConnection(&run, &s);
    close(run.epfd);
  };

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
