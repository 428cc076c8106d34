#include "providers/hub/http.h"

#include <curl/curl.h>

#include "engine/core/log.h"
#include "providers/http/classify.h"
#include "providers/http/curl_easy.h"
#include "providers/http/curl_global.h"

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

namespace berth {
namespace {

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
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
                                      const std::vector<std::string>& headers, int* curl_code) {
  CURL* c = static_cast<CURL*>(curl_);
  if (!c) return Status::Internal("curl_easy_init failed");
  curl_easy_reset(c);
  HttpResponse r;
  void* list = nullptr;
  Configure(c, url, headers, &list);
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  if (method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  CURLcode code = curl_easy_perform(c);
  curl_slist_free_all(static_cast<curl_slist*>(list));
  *curl_code = code;
  r.url = url;
  if (code != CURLE_OK)
    return Status::Unavailable(method + " " + url + ": " +
                               (errbuf[0] ? std::string(errbuf) : curl_easy_strerror(code)));
  r.status = ResponseStatus(c);
  r.headers = ResponseHeaders(c);
  return r;
}

Result<HttpResponse> HubHttp::Do(const std::string& method, const std::string& url,
                                 const std::vector<std::string>& headers) {
  int code = CURLE_OK;
  return Perform(method, url, headers, &code);
}

Result<HttpResponse> HubHttp::DoWithRetry(const std::string& method, const std::string& url,
                                          const std::string& what) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  RetryPolicy policy = RetryPolicyOf(opt_);
  HttpOrigin origin = IsHub(url) ? HttpOrigin::kHub : HttpOrigin::kCdn;
  Status last;
  for (int attempt = 1;; ++attempt) {
    int code = CURLE_OK;
    Result<HttpResponse> r = Perform(method, url, {}, &code);
    HttpOutcome outcome = Classify(r.ok() ? r->status : 0, static_cast<CURLcode>(code), origin);
    if (outcome != HttpOutcome::kRetryable && outcome != HttpOutcome::kRateLimited) {
      if (r.ok()) return r;
      return r.status();  // a transport error no retry can fix (a refused protocol, TLS)
    }
    long server_wait = r.ok() ? RetryAfterMs(*r) : 0;
    last = r.ok() ? HubError(*r, what, !opt_.token.empty()) : r.status();
    if (!policy.MayRetry(attempt)) break;
    long wait = policy.DelayMs(attempt, server_wait, unit(rng));
    spdlog::info("{}: attempt {} failed ({}); retrying in {} ms", what, attempt, last.message(),
                 wait);
    std::this_thread::sleep_for(std::chrono::milliseconds(wait));
  }
  return Status::Unavailable(last.message() + " (gave up after " + std::to_string(policy.attempts) +
                             " attempts)");
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
