// The only user of libcurl for etcd: CURLcode becomes an operator-facing detail here.
#include "providers/etcd/etcd_transport.h"

#include <curl/curl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "providers/http/curl_easy.h"
#include "providers/http/curl_global.h"

namespace berth {
namespace {

struct Body {
  std::string text;
  bool truncated = false;
  EtcdTraffic* traffic = nullptr;
};

size_t WriteBody(char* data, size_t size, size_t nmemb, void* user) {
  auto* body = static_cast<Body*>(user);
  size_t n = size * nmemb;
  if (body->traffic) body->traffic->bytes_read += n;
  if (body->text.size() + n > EtcdTransport::kMaxBodyBytes) {
    body->truncated = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  body->text.append(data, n);
  return n;
}

std::string UrlPart(CURLU* url, CURLUPart part) {
  char* value = nullptr;
  if (curl_url_get(url, part, &value, 0) != CURLUE_OK || !value) return "";
  std::string s(value);
  curl_free(value);
  return s;
}

std::string TransportError(CURLcode code, long os_errno, const char* errbuf,
                           const EtcdEndpoint& endpoint, long timeout_ms, bool sent) {
  std::string detail = errbuf[0] ? errbuf : curl_easy_strerror(code);
  switch (code) {
    case CURLE_COULDNT_CONNECT:
      if (!endpoint.unix_path.empty())
        return "cannot connect to socket " + endpoint.unix_path + " (" +
               (os_errno ? std::strerror(static_cast<int>(os_errno)) : detail) +
               "; is etcd running and listening there?)";
      if (os_errno != 0 && os_errno != ECONNREFUSED)
        return std::string("cannot connect (") + std::strerror(static_cast<int>(os_errno)) + ")";
      return "connection refused (is etcd running and listening on this address?)";
    case CURLE_OPERATION_TIMEDOUT:
      return "no answer within " + std::to_string(timeout_ms) + " ms (" + detail + ")";
    case CURLE_COULDNT_RESOLVE_HOST:
      return "cannot resolve the host (" + detail + ")";
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CIPHER:
      return "TLS failed (" + detail + "; check ca_file, cert_file and key_file)";
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
      if (endpoint.https && !sent)
        return "TLS failed: etcd refused or closed the handshake (" + detail +
               "; does etcd require a client certificate? check cert_file and key_file)";
      return "the connection closed without an answer (" + detail + ")";
    default:
      return detail;
  }
}

/// The request's headers: JSON, and the token when there is one. Null when out of memory.
curl_slist* RequestHeaders(const std::string& token) {
  curl_slist* list = curl_slist_append(nullptr, "Content-Type: application/json");
  if (list && !token.empty()) {
    curl_slist* more = curl_slist_append(list, ("Authorization: " + token).c_str());
    if (more) list = more;
  }
  return list;
}

/// What every POST to etcd sets: where (TCP or a unix socket, no proxy, no redirect), the
/// connect timeout, the headers and body, and TLS. `url`, `body` and `errbuf` must outlive the
/// transfer.
void SetUpPost(CURL* easy, const EtcdEndpoint& endpoint, const EtcdOptions& options,
               const std::string& url, curl_slist* headers, const std::string& body, char* errbuf) {
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  RestrictToHttp(easy);
  if (!endpoint.unix_path.empty())
    curl_easy_setopt(easy, CURLOPT_UNIX_SOCKET_PATH, endpoint.unix_path.c_str());
  curl_easy_setopt(easy, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.timeout.count()));
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(easy, CURLOPT_USERAGENT, "berth-etcd/" BERTH_VERSION);
  if (endpoint.https) {
    if (!options.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, options.ca_file.c_str());
    if (!options.cert_file.empty())
      curl_easy_setopt(easy, CURLOPT_SSLCERT, options.cert_file.c_str());
    if (!options.key_file.empty()) curl_easy_setopt(easy, CURLOPT_SSLKEY, options.key_file.c_str());
  }
}

}  // namespace

Result<EtcdEndpoint> ParseEtcdEndpoint(const std::string& text) {
  EtcdEndpoint e;
  e.name = text;
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("etcd endpoint '" + text + "': " + why +
                                   " (expected http://host:port, https://host:port or "
                                   "unix:///path/to/socket)");
  };
  if (text.rfind("unix://", 0) == 0) {
    e.unix_path = text.substr(7);
    if (e.unix_path.empty() || e.unix_path[0] != '/') return bad("the socket path is not absolute");
    if (e.unix_path.find('\0') != std::string::npos) return bad("the socket path holds a NUL");
    e.base_url = "http://localhost";
    return e;
  }
  CurlGlobalInit();
  std::unique_ptr<CURLU, decltype(&curl_url_cleanup)> url(curl_url(), &curl_url_cleanup);
  if (!url) return Status::Internal("etcd: cannot parse endpoints (curl_url: out of memory?)");
  if (curl_url_set(url.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK)
    return bad("not a URL with a scheme and a host");
  std::string scheme = UrlPart(url.get(), CURLUPART_SCHEME);
  if (scheme != "http" && scheme != "https") return bad("scheme '" + scheme + "' is not allowed");
  e.https = scheme == "https";
  if (UrlPart(url.get(), CURLUPART_HOST).empty()) return bad("no host");
  if (!UrlPart(url.get(), CURLUPART_USER).empty()) return bad("credentials in the URL");
  if (!UrlPart(url.get(), CURLUPART_QUERY).empty() ||
      !UrlPart(url.get(), CURLUPART_FRAGMENT).empty())
    return bad("a query or fragment");
  std::string path = UrlPart(url.get(), CURLUPART_PATH);
  while (!path.empty() && path.back() == '/') path.pop_back();
  curl_url_set(url.get(), CURLUPART_PATH, nullptr, 0);
  std::string origin = UrlPart(url.get(), CURLUPART_URL);
  while (!origin.empty() && origin.back() == '/') origin.pop_back();
  e.base_url = origin + path;
  return e;
}

struct EtcdTransport::Attempt {
  bool answered = false;
  bool sent = false;      // bytes of the request went out: it may have been applied
  bool too_long = false;  // the answer passed kMaxBodyBytes
  EtcdHttpAnswer answer;
  std::string error;
};

EtcdTransport::EtcdTransport(std::vector<EtcdEndpoint> endpoints, const EtcdOptions& options)
    : endpoints_(std::move(endpoints)), options_(options) {
  CurlGlobalInit();
}

EtcdTransport::~EtcdTransport() {
  for (void* easy : idle_) curl_easy_cleanup(easy);
}

void* EtcdTransport::TakeHandle() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      void* easy = idle_.back();
      idle_.pop_back();
      return easy;
    }
  }
  return curl_easy_init();
}

void EtcdTransport::GiveBack(void* easy) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(easy);
}

EtcdTransport::Attempt EtcdTransport::PostOnce(void* easy, const EtcdEndpoint& endpoint,
                                               const std::string& path, const std::string& body,
                                               const std::string& token) {
  Attempt a;
  a.answer.endpoint = endpoint.name;
  Body received;
  received.traffic = options_.traffic.get();
  char errbuf[CURL_ERROR_SIZE] = {0};
  long timeout_ms = static_cast<long>(options_.timeout.count());
  if (options_.traffic) ++options_.traffic->requests;
  std::string url = endpoint.base_url + path;
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(RequestHeaders(token),
                                                                      &curl_slist_free_all);
  curl_easy_reset(easy);  // keeps the connection cache
  SetUpPost(easy, endpoint, options_, url, headers.get(), body, errbuf);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &WriteBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &received);
  CURLcode code = curl_easy_perform(easy);
  curl_off_t request_size = 0;
  curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &request_size);
  a.sent = request_size > 0;
  // With TLS 1.3 the client may send its request before the server has checked the client's
  // certificate; a TLS alert back means the server refused the handshake and never read it.
  if (endpoint.https && std::strstr(errbuf, " alert ") != nullptr) a.sent = false;
  a.answer.status = ResponseStatus(easy);
  a.answer.body = std::move(received.text);
  if (received.truncated) {
    a.too_long = true;
    a.error = "the answer is longer than " + std::to_string(kMaxBodyBytes) + " bytes";
  } else if (code != CURLE_OK) {
    long os_errno = 0;
    curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno);
    a.error = TransportError(code, os_errno, errbuf, endpoint, timeout_ms, a.sent);
  } else {
    a.answered = true;
  }
  return a;
}

Result<EtcdHttpAnswer> EtcdTransport::Post(const std::string& path, const std::string& body,
                                           const std::string& token, const std::string& call,
                                           bool* too_long) {
  void* easy = TakeHandle();
  if (!easy) return Status::Internal("etcd " + call + ": curl_easy_init failed (out of memory?)");
  std::string tried;
  size_t first = preferred_.load();
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    size_t index = (first + i) % endpoints_.size();
    const EtcdEndpoint& endpoint = endpoints_[index];
    Attempt a = PostOnce(easy, endpoint, path, body, token);
    if (a.answered) {
      preferred_.store(index);
      GiveBack(easy);
      return std::move(a.answer);
    }
    if (a.too_long) {
      GiveBack(easy);
      if (too_long) *too_long = true;
      return Status::Internal("etcd " + endpoint.name + " " + call + ": " + a.error +
                              " (not an etcd answer: is this endpoint etcd's client URL?)");
    }
    tried += (tried.empty() ? "" : "; ") + endpoint.name + ": " + a.error;
    if (a.sent && a.answer.status == 0) {
      // Sent, no answer: it may have been applied there; not repeated elsewhere.
      preferred_.store((index + 1) % endpoints_.size());
      GiveBack(easy);
      return Status::Unavailable("etcd " + call + ": " + tried +
                                 " (the request may or may not have been applied; if this "
                                 "lasts, check that etcd runs there)");
    }
  }
  GiveBack(easy);
  return Status::Unavailable("etcd " + call + ": no endpoint answered: " + tried +
                             " (check that etcd runs and that the endpoints are right)");
}

}  // namespace berth

namespace berth {

Result<std::unique_ptr<EtcdStream>> EtcdTransport::OpenStream(const std::string& path,
                                                              const std::string& body,
                                                              const std::string& token) {
  const EtcdEndpoint& endpoint = endpoints_[preferred_.load() % endpoints_.size()];
  std::unique_ptr<EtcdStream> s(new EtcdStream());
  s->endpoint_ = endpoint.name;
  s->url_ = endpoint.base_url + path;
  s->body_ = body;
  s->unix_path_ = endpoint.unix_path;
  s->traffic_ = options_.traffic.get();
  s->easy_ = curl_easy_init();
  s->multi_ = curl_multi_init();
  if (!s->easy_ || !s->multi_)
    return Status::Internal("etcd watch: curl_easy_init failed (out of memory?)");
  s->headers_ = RequestHeaders(token);
  s->timeout_ms_ = static_cast<long>(options_.timeout.count());
  CURL* easy = s->easy_;
  SetUpPost(easy, endpoint, options_, s->url_, static_cast<curl_slist*>(s->headers_), s->body_,
            s->errbuf_);
  curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);  // no overall timeout: TCP finds a dead peer
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &EtcdStream::Write);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, s.get());
  if (curl_multi_add_handle(s->multi_, easy) != CURLM_OK)
    return Status::Internal("etcd watch: curl_multi_add_handle failed");
  if (options_.traffic) {
    ++options_.traffic->requests;
    ++options_.traffic->watches;
  }
  return s;
}

EtcdStream::~EtcdStream() {
  if (multi_ && easy_) curl_multi_remove_handle(multi_, easy_);
  if (easy_) curl_easy_cleanup(easy_);
  if (multi_) curl_multi_cleanup(multi_);
  curl_slist_free_all(static_cast<curl_slist*>(headers_));
}

size_t EtcdStream::Write(char* data, size_t size, size_t nmemb, void* user) {
  auto* s = static_cast<EtcdStream*>(user);
  size_t n = size * nmemb;
  if (s->traffic_) s->traffic_->bytes_read += n;
  std::string_view in(data, n);
  while (!in.empty()) {
    size_t nl = in.find('\n');
    std::string_view piece = in.substr(0, nl);
    if (s->partial_.size() + piece.size() > EtcdTransport::kMaxBodyBytes) {
      s->too_long_ = true;
      return 0;
    }
    s->partial_.append(piece);
    if (nl == std::string_view::npos) break;
    in.remove_prefix(nl + 1);
    if (!s->partial_.empty() && s->partial_.back() == '\r') s->partial_.pop_back();
    if (!s->partial_.empty()) s->lines_.push_back(std::move(s->partial_));
    s->partial_.clear();
  }
  return n;
}

long EtcdStream::status() const { return easy_ ? ResponseStatus(easy_) : 0; }

Status EtcdStream::Read(std::chrono::milliseconds window,
                        const std::function<bool(std::string_view)>& on_line,
                        const std::atomic<bool>* stop, bool* timed_out) {
  *timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + window;
  for (;;) {
    while (!lines_.empty()) {
      std::string line = std::move(lines_.front());
      lines_.pop_front();
      if (!on_line(line)) return Status::Ok();
    }
    if (too_long_)
      return Status::Internal("a line of the stream is longer than " +
                              std::to_string(EtcdTransport::kMaxBodyBytes) + " bytes");
    if (ended_) return Status::Unavailable(error_);
    if (stop && stop->load()) return Status::Ok();
    int running = 0;
    curl_multi_perform(multi_, &running);
    int queued = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_, &queued)) {
      if (m->msg != CURLMSG_DONE) continue;
      ended_ = true;
      CURLcode code = m->data.result;
      if (code == CURLE_OK && !partial_.empty()) lines_.push_back(std::move(partial_));
      partial_.clear();
      if (too_long_) {
        // Reported above, on the next turn.
      } else if (code == CURLE_OK) {
        error_ = "the server ended the stream";
      } else {
        long os_errno = 0;
        curl_easy_getinfo(easy_, CURLINFO_OS_ERRNO, &os_errno);
        EtcdEndpoint e;
        e.name = endpoint_;
        e.unix_path = unix_path_;
        e.https = url_.starts_with("https://");
        error_ = TransportError(code, os_errno, errbuf_, e, timeout_ms_, status() != 0);
      }
    }
    if (!lines_.empty() || ended_ || too_long_) continue;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      *timed_out = true;
      return Status::Ok();
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    int wait_ms = static_cast<int>(std::clamp<int64_t>(left.count(), 1, 100));
    curl_multi_poll(multi_, nullptr, 0, wait_ms, nullptr);
  }
}

}  // namespace berth
