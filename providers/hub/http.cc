#include "providers/hub/http.h"

#include <curl/curl.h>

#include "engine/core/log.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

namespace berth {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) headers->clear();  // a new response (after 100-continue)
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    size_t b = colon + 1;
    while (b < line.size() && line[b] == ' ') ++b;
    size_t e = line.size();
    while (e > b && (line[e - 1] == '\r' || line[e - 1] == '\n' || line[e - 1] == ' ')) --e;
    (*headers)[name] = line.substr(b, e - b);
  }
  return size * n;
}

const char* CaBundle() {
  for (const char* v : {"CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"})
    if (const char* p = std::getenv(v); p && *p) return p;
  return nullptr;
}

bool Retryable(long status) {
  return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 ||
         status == 504;
}

}  // namespace

std::string OriginOf(const std::string& url) {
  size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  size_t end = url.find_first_of("/?#", scheme + 3);
  std::string origin = url.substr(0, end);
  std::transform(origin.begin(), origin.end(), origin.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // Make the default ports explicit so "https://h" and "https://h:443" compare equal.
  std::string host = origin.substr(scheme + 3);
  if (host.find(':') == std::string::npos) origin += origin.rfind("https", 0) == 0 ? ":443" : ":80";
  return origin;
}

std::string ResolveLocation(const std::string& base, const std::string& location) {
  if (location.find("://") != std::string::npos) return location;
  size_t scheme = base.find("://");
  size_t end = base.find_first_of("/?#", scheme + 3);
  std::string origin = base.substr(0, end);
  if (!location.empty() && location[0] == '/') return origin + location;
  size_t slash = base.rfind('/', base.find('?'));
  return base.substr(0, slash + 1) + location;
}

long RetryAfterMs(const HttpResponse& r) {
  long ms = 0;
  std::string ra = r.Header("retry-after");
  if (!ra.empty() && std::all_of(ra.begin(), ra.end(), ::isdigit))
    ms = std::atol(ra.c_str()) * 1000;
  std::string rl = r.Header("ratelimit");
  size_t rpos = rl.find(";r=");
  size_t tpos = rl.find(";t=");
  if (rpos != std::string::npos && tpos != std::string::npos &&
      std::atol(rl.c_str() + rpos + 3) == 0)
    ms = std::max(ms, std::atol(rl.c_str() + tpos + 3) * 1000);
  return ms;
}

std::string UrlEncode(const std::string& s, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

HubHttp::HubHttp(HubOptions options) : opt_(std::move(options)) {
  GlobalInit();
  curl_ = curl_easy_init();
}

HubHttp::~HubHttp() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

void HubHttp::Configure(void* handle, const std::string& url, const std::vector<std::string>& extra,
                        void** headers) const {
  CURL* c = static_cast<CURL*>(handle);
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
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
  if (!opt_.token.empty() && OriginOf(url) == OriginOf(opt_.endpoint))
    list = curl_slist_append(list, ("Authorization: Bearer " + opt_.token).c_str());
  for (const auto& h : extra) list = curl_slist_append(list, h.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  *headers = list;
}

Result<HttpResponse> HubHttp::Do(const std::string& method, const std::string& url,
                                 const std::vector<std::string>& headers) {
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
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
  CURLcode code = curl_easy_perform(c);
  curl_slist_free_all(static_cast<curl_slist*>(list));
  r.url = url;
  if (code != CURLE_OK)
    return Status::Unavailable(method + " " + url + ": " +
                               (errbuf[0] ? std::string(errbuf) : curl_easy_strerror(code)));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  return r;
}

Result<HttpResponse> HubHttp::DoWithRetry(const std::string& method, const std::string& url,
                                          const std::string& what) {
  std::mt19937 rng(std::random_device{}());
  long backoff = opt_.backoff_ms;
  Status last;
  for (int attempt = 1; attempt <= opt_.max_attempts; ++attempt) {
    Result<HttpResponse> r = Do(method, url);
    long wait = 0;
    if (r.ok()) {
      if (!Retryable(r->status)) return r;
      wait = RetryAfterMs(*r);
      last = HubError(*r, what, !opt_.token.empty());
    } else {
      last = r.status();
    }
    if (attempt == opt_.max_attempts) break;
    long jitter = std::uniform_int_distribution<long>(0, backoff / 2)(rng);
    spdlog::info("{}: attempt {} failed ({}); retrying in {} ms", what, attempt, last.message(),
                 std::max(wait, backoff + jitter));
    std::this_thread::sleep_for(std::chrono::milliseconds(std::max(wait, backoff + jitter)));
    backoff = std::min<long>(backoff * 2, opt_.max_backoff_ms);
  }
  return Status::Unavailable(last.message() + " (gave up after " +
                             std::to_string(opt_.max_attempts) + " attempts)");
}

Status HubError(const HttpResponse& r, const std::string& what, bool have_token) {
  std::string code = r.Header("x-error-code");
  std::string msg = r.Header("x-error-message");
  std::string head = what + ": HTTP " + std::to_string(r.status) +
                     (code.empty() ? "" : " " + code) + (msg.empty() ? "" : " (" + msg + ")");
  if (msg.find("Invalid credentials") != std::string::npos || (r.status == 401 && code.empty()))
    return Status::PermissionDenied(
        head +
        ": the Hub refused the token; check HF_TOKEN or the token file "
        "(HF_TOKEN_PATH, $HF_HOME/token) and create a new token if needed");
  if (code == "GatedRepo")
    return Status::PermissionDenied(
        head + (have_token ? ": this token's account has no access to the gated repo; accept its "
                             "conditions on the Hub with that account"
                           : ": the repo is gated; set HF_TOKEN to a token of an account that "
                             "accepted its conditions"));
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
  if (msg.find("disabled") != std::string::npos)
    return Status::PermissionDenied(head +
                                    ": the repo is disabled on the Hub; choose another source");
  if (r.status == 429)
    return Status::Unavailable(head +
                               ": rate limited by the Hub; berth waits and retries "
                               "(a token raises the limits)");
  if (r.status >= 500) return Status::Unavailable(head + ": the Hub had an error; berth retries");
  return Status::Unavailable(head);
}

}  // namespace berth
