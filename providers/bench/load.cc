// The load generator's event loop: libcurl multi, one easy handle per stream, reused for the
// stream's next request (and so its connection). CURLcode becomes an operator's sentence here.
#include "providers/bench/load.h"

#include <curl/curl.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
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

/// At most `cap` samples, each of the values seen equally likely to be kept.
class Reservoir {
 public:
  explicit Reservoir(size_t cap) : cap_(cap) {}
  void Add(double x) {
    ++seen_;
    if (samples_.size() < cap_) {
      samples_.push_back(x);
      return;
    }
    uint64_t j = std::uniform_int_distribution<uint64_t>(0, seen_ - 1)(rng_);
    if (j < cap_) samples_[j] = x;
  }
  std::vector<double>* samples() { return &samples_; }

 private:
  size_t cap_;
  uint64_t seen_ = 0;
  std::vector<double> samples_;
  std::minstd_rand rng_{12345};
};

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

/// One of the streams: its handle and the request it has in flight.
struct Stream {
  Run* run = nullptr;
  CURL* easy = nullptr;
  std::string body;
  std::unique_ptr<SseParser> parser;
  Clock::TimePoint started{};
  Clock::TimePoint last_token{};
  bool got_token = false;
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
  std::string url;
  Clock::TimePoint deadline{};
  uint64_t next_request = 0;
  LoadFigures result;
  Reservoir ttft, itl;
  Run(const LoadSpec& s, Clock* c) : spec(s), clock(c), ttft(s.max_samples), itl(s.max_samples) {}

  void Error(const std::string& what) {
    ++result.errors;
    if (result.first_error.empty()) result.first_error = "POST " + url + ": " + what;
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
  if (e.content_deltas == 0 || now >= s->run->deadline) return true;
  s->deltas += e.content_deltas;
  s->content_bytes += e.content_bytes;
  if (!s->got_token)
    s->run->ttft.Add(Ms(now - s->started));
  else
    s->run->itl.Add(Ms(now - s->last_token));
  s->got_token = true;
  s->last_token = now;
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
  bool ok = s->parser->Feed(std::string_view(data, len),
                            [s, now](std::string_view event) { return OnEvent(s, event, now); });
  if (!ok) {
    if (s->fail.empty()) s->fail = s->parser->error() + " (the stream is cut off there)";
    return CURL_WRITEFUNC_ERROR;
  }
  return len;
}

void Start(Run* run, Stream* s, CURLM* multi) {
  uint64_t request = run->next_request++;
  s->body = RequestBody(run->spec, request);
  s->parser = std::make_unique<SseParser>(run->spec.max_event_bytes);
  s->got_token = s->done = s->has_usage = false;
  s->deltas = s->content_bytes = s->usage_tokens = 0;
  s->status = 0;
  s->fail.clear();
  s->error_body.clear();
  s->errbuf[0] = 0;
  curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->body.c_str());
  curl_easy_setopt(s->easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(s->body.size()));
  s->started = run->clock->Now();
  curl_multi_add_handle(multi, s->easy);
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

/// Folds a finished request into the result.
void Finish(Run* run, Stream* s, CURLcode code) {
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
    ++run->result.requests;
    run->result.output_tokens += CountedTokens(*s, run->spec);
  }
}

}  // namespace

double Percentile(std::vector<double>* samples, double q) {
  if (samples->empty()) return 0;
  std::sort(samples->begin(), samples->end());
  double rank = std::ceil(q * static_cast<double>(samples->size()));
  size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return (*samples)[std::min(i, samples->size() - 1)];
}

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
  if (spec.duration.count() <= 0) return Status::InvalidArgument("the duration must be positive");
  CurlGlobalInit();
  Run run(spec, clock ? clock : &RealClock());
  run.result.concurrency = spec.concurrency;
  std::string host = spec.host.find(':') != std::string::npos ? "[" + spec.host + "]" : spec.host;
  run.url = "http://" + host + ":" + std::to_string(spec.port) +
            (spec.chat ? "/v1/chat/completions" : "/v1/completions");

  std::unique_ptr<CURLM, decltype(&curl_multi_cleanup)> multi(curl_multi_init(),
                                                              &curl_multi_cleanup);
  if (!multi) return Status::Internal("cannot start an HTTP client (curl_multi_init failed)");
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
      curl_multi_remove_handle(multi.get(), s.easy);
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

  Clock::TimePoint start = run.clock->Now();
  run.deadline = start + spec.duration;
  for (auto& s : streams) Start(&run, &s, multi.get());
  bool stopped = false;
  while (true) {
    int running = 0;
    curl_multi_perform(multi.get(), &running);
    Clock::TimePoint now = run.clock->Now();
    // What ends after the measured time is not part of it: requests still attached then are
    // cancelled with the tokens they had (OnEvent counts none after the deadline).
    if (now >= run.deadline) break;
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi.get(), &left)) {
      if (msg->msg != CURLMSG_DONE) continue;
      Stream* s = nullptr;
      curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &s);
      CURLcode code = msg->data.result;
      curl_multi_remove_handle(multi.get(), s->easy);
      Finish(&run, s, code);
      Start(&run, s, multi.get());
    }
    if ((stop && stop->load()) ||
        (spec.max_errors > 0 && run.result.errors >= static_cast<uint64_t>(spec.max_errors))) {
      stopped = true;
      break;
    }
    auto wait =
        std::min<Clock::TimePoint::duration>(run.deadline - now, std::chrono::milliseconds(50));
    int wait_ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count());
    curl_multi_poll(multi.get(), nullptr, 0, std::max(wait_ms, 1), nullptr);
  }
  Clock::TimePoint end = stopped ? run.clock->Now() : run.deadline;
  // Every stream has a request attached: a finished one was replaced at once.
  for (const auto& s : streams) {
    ++run.result.cancelled;
    run.result.output_tokens += std::min(s.deltas, static_cast<uint64_t>(spec.max_tokens));
  }
  cleanup();

  LoadFigures& r = run.result;
  r.seconds = std::chrono::duration<double>(end - start).count();
  r.output_tps = r.seconds > 0 ? static_cast<double>(r.output_tokens) / r.seconds : 0;
  r.ttft_p50_ms = Percentile(run.ttft.samples(), 0.50);
  r.ttft_p90_ms = Percentile(run.ttft.samples(), 0.90);
  r.ttft_p99_ms = Percentile(run.ttft.samples(), 0.99);
  r.itl_p50_ms = Percentile(run.itl.samples(), 0.50);
  r.itl_p90_ms = Percentile(run.itl.samples(), 0.90);
  r.itl_p99_ms = Percentile(run.itl.samples(), 0.99);
  return r;
}

}  // namespace berth
