// POSTs to etcd's JSON gateway over libcurl, across the configured endpoints: a request that
// cannot reach one endpoint goes to the next, and the last endpoint that answered is tried
// first next time. Bounded bodies, per-request timeouts, TLS and unix sockets. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "providers/etcd/etcd.h"

namespace berth {

/// One endpoint as given ("http://h:2379", "unix:///run/etcd.sock") and how to reach it.
struct EtcdEndpoint {
  std::string name;  // as given, for messages
  std::string
      base_url;  // "http://h:2379" ("http://localhost" for a unix socket), no '/' at the end
  std::string unix_path;  // the socket file, "" for TCP
  bool https = false;
};

/// Parses `text`: http:// or https:// with a host (an optional port and path prefix, no query,
/// no user), or unix:// with an absolute path. InvalidArgument naming what is wrong.
Result<EtcdEndpoint> ParseEtcdEndpoint(const std::string& text);

/// What one endpoint answered: its HTTP status and body (at most kMaxBodyBytes).
struct EtcdHttpAnswer {
  std::string endpoint;  // its name
  long status = 0;
  std::string body;
};

/// A streamed answer kept open across reads (EtcdTransport::OpenStream): the lines that arrive
/// while nobody reads wait in the socket and in a queue here.
class EtcdStream {
 public:
  ~EtcdStream();
  EtcdStream(const EtcdStream&) = delete;
  EtcdStream& operator=(const EtcdStream&) = delete;
  /// Gives the lines, queued and arriving, to `on_line` until it returns false (the lines after
  /// that one stay queued), `window` passes (Ok, `*timed_out`), or `*stop` (when not null) turns
  /// true (Ok, checked every 100 ms). Unavailable once the stream broke off or the server ended
  /// it (after its last lines); Internal for a line over EtcdTransport::kMaxBodyBytes.
  Status Read(std::chrono::milliseconds window,
              const std::function<bool(std::string_view)>& on_line, const std::atomic<bool>* stop,
              bool* timed_out);
  /// The answer's HTTP status once its head came, else 0.
  long status() const;
  const std::string& endpoint() const { return endpoint_; }

 private:
  friend class EtcdTransport;
  EtcdStream() = default;
  static size_t Write(char* data, size_t size, size_t nmemb, void* user);
  void* multi_ = nullptr;
  void* easy_ = nullptr;
  void* headers_ = nullptr;  // curl_slist
  std::string endpoint_;
  std::string url_;
  std::string body_;
  std::string unix_path_;
  char errbuf_[256] = {0};
  long timeout_ms_ = 0;
  EtcdTraffic* traffic_ = nullptr;
  std::deque<std::string> lines_;
  std::string partial_;
  bool ended_ = false;
  bool too_long_ = false;
  std::string error_;  // how it ended, when it did
};

class EtcdTransport {
 public:
  static constexpr size_t kMaxBodyBytes = 16 << 20;

  /// `options` gives the TLS files and the timeout; `endpoints` are ParseEtcdEndpoint's.
  EtcdTransport(std::vector<EtcdEndpoint> endpoints, const EtcdOptions& options);
  ~EtcdTransport();
  EtcdTransport(const EtcdTransport&) = delete;
  EtcdTransport& operator=(const EtcdTransport&) = delete;

  /// POSTs `body` (JSON) to `path` ("/v3/kv/range"), with header "Authorization: `token`" when
  /// `token` is not empty. Any HTTP status is an answer. Unavailable when no endpoint answered:
  /// each endpoint tried and why. A request that was sent but got no answer (timed out, the
  /// connection dropped) is not sent again elsewhere (it may have been applied): it fails
  /// Unavailable at once, and the next request starts at the next endpoint. Internal for an
  /// answer over kMaxBodyBytes, with `*too_long` (when given) set. `call` names the request in
  /// messages ("range").
  Result<EtcdHttpAnswer> Post(const std::string& path, const std::string& body,
                              const std::string& token, const std::string& call,
                              bool* too_long = nullptr);

  const std::vector<EtcdEndpoint>& endpoints() const { return endpoints_; }

  /// Opens a streamed POST kept open across reads (a watch) at the endpoint that answered last.
  /// Connecting happens on the first read.
  Result<std::unique_ptr<EtcdStream>> OpenStream(const std::string& path, const std::string& body,
                                                 const std::string& token);

 private:
  struct Attempt;
  Attempt PostOnce(void* easy, const EtcdEndpoint& endpoint, const std::string& path,
                   const std::string& body, const std::string& token);
  void* TakeHandle();
  void GiveBack(void* easy);

  std::vector<EtcdEndpoint> endpoints_;
  EtcdOptions options_;
  std::atomic<size_t> preferred_{0};  // the endpoint tried first
  std::mutex mu_;
  std::vector<void*> idle_;  // CURL easy handles kept for their connections
};

}  // namespace berth
