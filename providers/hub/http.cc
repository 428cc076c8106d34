#include "providers/hub/http.h"

#include <curl/curl.h>

#include "core/clock.h"
#include "core/log.h"
#include "providers/http/classify.h"
#include "providers/http/curl_easy.h"
#include "providers/http/curl_global.h"

#include <chrono>
#include <cstdlib>
#include <random>

namespace berth {
namespace {

/// Where a body goes: at most `max` bytes of it; more stops the transfer (CURLE_WRITE_ERROR).
struct BodySink {
  std::string* body;
  size_t max;
  bool over = false;
};

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<BodySink*>(user);
  if (size * n > sink->max - sink->body->size()) {
    sink->over = true;
    return 0;
  }
  sink->body->append(data, size * n);
  return size * n;
}

std::string Mib(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

/// Transport errors that say the Hub cannot be reached at all: its name does not resolve (no
/// DNS on an air-gapped host) or nothing accepts the connection. Retrying them for minutes only
/// delays the plan that the store and berth.lock can make without it.
bool Unreachable(int code) {
  return code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_RESOLVE_PROXY ||
         code == CURLE_COULDNT_CONNECT;
}

const char* CaBundle() {
  for (const char* v : {"CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"})
    if (const char* p = std::getenv(v); p && *p) return p;
  return nullptr;
}

}  // namespace

long RetryAfterMs(const HttpResponse& r) {
  return ServerWaitMs(r.Header("retry-after"), r.Header("ratelimit"));
}

RetryPolicy RetryPolicyOf(const HubOptions& options) {
  RetryPolicy p;
  p.attempts = std::max(1, options.max_attempts);
  p.first_backoff_ms = options.backoff_ms;
  p.max_backoff_ms = options.max_backoff_ms;
  return p;
}

HubHttp::HubHttp(HubOptions options)
    : opt_(std::move(options)), hub_origin_(OriginOf(opt_.endpoint)) {
  CurlGlobalInit();
  curl_ = curl_easy_init();
}

HubHttp::~HubHttp() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

bool HubHttp::IsHub(const std::string& url) const {
  return !hub_origin_.empty() && OriginOf(url) == hub_origin_;
}

void HubHttp::Configure(void* handle, const std::string& url, const std::vector<std::string>& extra,
                        void** headers) const {
  CURL* c = static_cast<CURL*>(handle);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  RestrictToHttp(c);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, opt_.connect_timeout_s);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, opt_.stall_timeout_s);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "berth/" BERTH_VERSION "; hf_hub-compatible");
  if (const char* ca = CaBundle()) curl_easy_setopt(c, CURLOPT_CAINFO, ca);
  curl_slist* list = nullptr;
  list = curl_slist_append(list, "Accept-Encoding: identity");
  // The token goes to the Hub's own origin only: never to a CDN a redirect points at.
  if (!opt_.token.empty() && IsHub(url))
    list = curl_slist_append(list, ("Authorization: Bearer " + opt_.token).c_str());
  for (const auto& h : extra) list = curl_slist_append(list, h.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  *headers = list;
}

Result<HttpResponse> HubHttp::Perform(const std::string& method, const std::string& url,
                                      const std::vector<std::string>& headers, size_t max_body,
                                      int* curl_code) {
  CURL* c = static_cast<CURL*>(curl_);
  if (!c) return Status::Internal("curl_easy_init failed");
  ++requests_sent_;
  curl_easy_reset(c);
  HttpResponse r;
  void* list = nullptr;
  Configure(c, url, headers, &list);
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  if (method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  BodySink sink{&r.body, max_body};
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  CURLcode code = curl_easy_perform(c);
  curl_slist_free_all(static_cast<curl_slist*>(list));
  *curl_code = code;
  r.url = url;
  if (sink.over)
    return Status::Unavailable(method + " " + url.substr(0, 300) + ": the answer is longer than " +
                               Mib(max_body) +
                               ", more than any Hub answer berth asks for; it was not read "
                               "further (is HF_ENDPOINT a Hugging Face Hub?)");
  if (code != CURLE_OK)
    return Status::Unavailable(method + " " + url + ": " +
                               (errbuf[0] ? std::string(errbuf) : curl_easy_strerror(code)));
  r.status = ResponseStatus(c);
  r.headers = ResponseHeaders(c);
  return r;
}

Result<HttpResponse> HubHttp::Do(const std::string& method, const std::string& url,
                                 const std::vector<std::string>& headers, size_t max_body) {
  int code = CURLE_OK;
  return Perform(method, url, headers, max_body, &code);
}

Result<HttpResponse> HubHttp::DoWithRetry(const std::string& method, const std::string& url,
                                          const std::string& what, size_t max_body) {
  const bool hub = IsHub(url);
  if (hub && !unreachable_.ok())
    return Status::Unavailable(what + ": not asked: " + unreachable_.message());
  Clock& clock = opt_.clock ? *opt_.clock : RealClock();
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  RetryPolicy policy = RetryPolicyOf(opt_);
  HttpOrigin origin = hub ? HttpOrigin::kHub : HttpOrigin::kCdn;
  Status last;
  std::string gave_up;
  for (int attempt = 1;; ++attempt) {
    int code = CURLE_OK;
    Result<HttpResponse> r = Perform(method, url, {}, max_body, &code);
    HttpOutcome outcome = Classify(r.ok() ? r->status : 0, static_cast<CURLcode>(code), origin);
    if (outcome != HttpOutcome::kRetryable && outcome != HttpOutcome::kRateLimited) {
      if (r.ok()) return r;
      return r.status();  // a transport error no retry can fix (a refused protocol, TLS)
    }
    if (!r.ok() && Unreachable(code)) {
      // No name, no listener: the next attempt would say the same. One is enough.
      if (hub)
        unreachable_ = Status::Unavailable("the Hub " + opt_.endpoint + " cannot be reached (" +
                                           r.status().message() + ")");
      return Status::Unavailable(what + ": " + r.status().message() +
                                 " (not retried: the Hub cannot be reached)");
    }
    long server_wait = r.ok() ? RetryAfterMs(*r) : 0;
    last = r.ok() ? HubError(*r, what, !opt_.token.empty()) : r.status();
    if (!policy.MayRetry(attempt)) {
      gave_up = "gave up after " + std::to_string(attempt) + " attempts";
      break;
    }
    long wait = policy.DelayMs(attempt, server_wait, unit(rng));
    if (opt_.retry_budget_ms > 0 && waited_ms_ + wait > opt_.retry_budget_ms) {
      gave_up = "gave up after " + std::to_string(attempt) + " attempt" +
                (attempt == 1 ? "" : "s") + ": berth waits at most " +
                std::to_string(opt_.retry_budget_ms / 1000) + " s in all for the Hub here";
      break;
    }
    waited_ms_ += wait;
    spdlog::info("{}: attempt {} failed ({}); retrying in {} ms", what, attempt, last.message(),
                 wait);
    clock.SleepFor(std::chrono::milliseconds(wait));
  }
  Status failed = Status::Unavailable(last.message() + " (" + gave_up + ")");
  if (hub)
    unreachable_ = Status::Unavailable("the Hub " + opt_.endpoint + " did not answer (" +
                                       failed.message() + ")");
  return failed;
}

Status HubError(const HttpResponse& r, const std::string& what, bool have_token) {
  std::string code = r.Header("x-error-code");
  std::string msg = r.Header("x-error-message");
  std::string head = what + ": HTTP " + std::to_string(r.status) +
                     (code.empty() ? "" : " " + code) + (msg.empty() ? "" : " (" + msg + ")");
  bool gated = code == "GatedRepo";
  switch (Classify(r.status, CURLE_OK, HttpOrigin::kHub)) {
    case HttpOutcome::kUnauthorized:
      if (gated)
        return Status::PermissionDenied(head +
                                        ": the repo is gated; set HF_TOKEN to a token of an "
                                        "account that accepted its conditions");
      if (code == "RepoNotFound") break;  // private or missing: said below
      // A 401 that names no repo problem: the token itself was refused.
      return Status::PermissionDenied(
          head +
          ": the Hub refused the token; check HF_TOKEN or the token file "
          "(HF_TOKEN_PATH, $HF_HOME/token) and create a new token if needed");
    case HttpOutcome::kForbidden:
      if (gated)
        return Status::PermissionDenied(
            head + (have_token ? ": this token's account has no access to the gated repo; "
                                 "accept its conditions on the Hub with that account"
                               : ": the repo is gated; set HF_TOKEN to a token of an account "
                                 "that accepted its conditions"));
      return Status::PermissionDenied(
          head +
          ": the Hub refuses access (a repo disabled on the Hub, or a token without the "
          "right to read it); check the source: in the manifest and HF_TOKEN");
    case HttpOutcome::kRateLimited:
      return Status::Unavailable(head +
                                 ": rate limited by the Hub; berth waits and retries "
                                 "(a token raises the limits)");
    case HttpOutcome::kRetryable:
      if (r.status >= 500)
        return Status::Unavailable(head + ": the Hub had an error; berth retries");
      return Status::Unavailable(head);
    default:
      break;
  }
  if (code == "RepoNotFound")
    return Status::NotFound(head + (have_token
                                        ? ": no such repo (or it is private to another account); "
                                          "check the source: in the manifest"
                                        : ": no such repo, or it is private: check the "
                                          "source: in the manifest, or set HF_TOKEN"));
  if (code == "RevisionNotFound")
    return Status::NotFound(head +
                            ": the repo has no such branch, tag or commit; check revision: "
                            "in the manifest");
  if (code == "EntryNotFound")
    return Status::NotFound(head + ": the file is not in the repo at that revision");
  return Status::Unavailable(head);
}

}  // namespace berth
