// Etcd through the v3 JSON gateway: request bodies and answers (etcd_wire), transport and
// failover (etcd_transport), auth tokens and etcd's errors turned into Status here.
#include <algorithm>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/json_text.h"
#include "core/untrusted_text.h"
#include "providers/etcd/etcd.h"
#include "providers/etcd/etcd_transport.h"
#include "providers/etcd/etcd_wire.h"

namespace berth {
namespace {

using nlohmann::json;

// gRPC status codes etcd puts in its error answers.
constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcNotFound = 5;
constexpr int kGrpcPermissionDenied = 7;
constexpr int kGrpcResourceExhausted = 8;
constexpr int kGrpcFailedPrecondition = 9;
constexpr int kGrpcUnavailable = 14;
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcUnauthenticated = 16;

std::string Snippet(const std::string& text) {
  if (text.empty()) return "(empty)";
  return Excerpt(text, 120);
}

/// An answer, parsed: the endpoint that gave it, its status and JSON (the first line of a
/// stream such as keepalive's).
struct Answer {
  std::string endpoint;
  long status = 0;
  json body;
  etcd_wire::EtcdError error;  // when has_error
  bool has_error = false;
};

class GatewayEtcd : public Etcd {
 public:
  /// Keys per range request at first (a fleet's reports are a KiB or two each).
  static constexpr int64_t kRangePageKeys = 256;

  GatewayEtcd(std::vector<EtcdEndpoint> endpoints, const EtcdOptions& options)
      : options_(options), transport_(std::move(endpoints), options) {}

  Result<std::vector<EtcdKv>> Range(const std::string& prefix, int64_t limit,
                                    size_t max_value_bytes, int64_t* revision) override {
    if (limit < 0) return Status::InvalidArgument("etcd range: a negative limit");
    const std::string end = etcd_wire::RangeEnd(prefix);
    std::string from = prefix.empty() ? std::string(1, '\0') : prefix;
    std::vector<EtcdKv> out;
    // The first page's revision: later pages are read at it, so that the whole range is one
    // view of the store.
    int64_t at = 0;
    if (revision) *revision = 0;
    auto full = [&] { return limit > 0 && static_cast<int64_t>(out.size()) >= limit; };
    // Keys per request: halved (for the rest of the range) while an answer is too long.
    int64_t page = kRangePageKeys;
    for (;;) {
      int64_t want = limit > 0 ? std::min(page, limit - static_cast<int64_t>(out.size())) : page;
      bool too_long = false;
      Result<Answer> a =
          Call("/v3/kv/range", "range", etcd_wire::RangeBody(from, end, want, false, at),
               /*not_found_ok=*/false, &too_long);
      if (!a.ok() && too_long && want > 1) {
        page = std::max<int64_t>(1, want / 2);
        continue;
      }
      if (!a.ok() && too_long) {
        // One value alone is larger than an answer may be: its key, without it.
        Result<Answer> k = Call("/v3/kv/range", "range",
                                etcd_wire::RangeBody(from, end, 1, /*keys_only=*/true, at));
        if (!k.ok()) return k.status();
        std::vector<EtcdKv> keys;
        if (std::string e = etcd_wire::ReadKvs(k->body, &keys); !e.empty())
          return Malformed(*k, "range", e);
        if (keys.empty()) return out;  // deleted meanwhile
        keys[0].value.clear();
        keys[0].too_large = true;
        from = keys[0].key + std::string(1, '\0');
        out.push_back(std::move(keys[0]));
        if (full()) return out;
        continue;
      }
      if (!a.ok()) return a.status();
      if (at == 0) {
        if (std::string e = etcd_wire::ReadHeaderRevision(a->body, &at); !e.empty())
          return Malformed(*a, "range", e);
        if (revision) *revision = at;
      }
      std::vector<EtcdKv> kvs;
      bool more = false;
      if (std::string e = etcd_wire::ReadKvs(a->body, &kvs); !e.empty())
        return Malformed(*a, "range", e);
      if (std::string e = etcd_wire::ReadMore(a->body, &more); !e.empty())
        return Malformed(*a, "range", e);
      if (!kvs.empty() && kvs.front().key < from)
        return Malformed(*a, "range", "it holds keys before the one asked for");
      for (EtcdKv& kv : kvs) {
        if (max_value_bytes > 0 && kv.value.size() > max_value_bytes) {
          kv.value = std::string();
          kv.too_large = true;
        }
        out.push_back(std::move(kv));
      }
      if (!more || kvs.empty() || full()) return out;
      from = out.back().key + std::string(1, '\0');
    }
  }

  Result<std::optional<EtcdKv>> Get(const std::string& key) override {
    if (key.empty()) return Status::InvalidArgument("etcd get: an empty key");
    Result<Answer> a = Call("/v3/kv/range", "get", etcd_wire::RangeBody(key, "", 0));
    if (!a.ok()) return a.status();
    std::vector<EtcdKv> kvs;
    if (std::string e = etcd_wire::ReadKvs(a->body, &kvs); !e.empty())
      return Malformed(*a, "get", e);
    if (kvs.size() > 1 || (kvs.size() == 1 && kvs[0].key != key))
      return Malformed(*a, "get", "it holds other keys than the one asked for");
    if (kvs.empty()) return std::optional<EtcdKv>();
    return std::optional<EtcdKv>(std::move(kvs[0]));
  }

  Status Put(const std::string& key, const std::string& value, int64_t lease) override {
    if (key.empty()) return Status::InvalidArgument("etcd put: an empty key");
    Result<Answer> a = Call("/v3/kv/put", "put", etcd_wire::PutBody(key, value, lease));
    if (!a.ok()) return a.status();
    return HasHeader(*a, "put");
  }

  Result<bool> CreateIfAbsent(const std::string& key, const std::string& value, int64_t lease,
                              EtcdKv* existing) override {
    if (key.empty()) return Status::InvalidArgument("etcd create-if-absent: an empty key");
    const char* call = "txn (create-if-absent)";
    Result<Answer> a = Call("/v3/kv/txn", call, etcd_wire::CreateIfAbsentBody(key, value, lease));
    if (!a.ok()) return a.status();
    bool succeeded = false;
    std::vector<EtcdKv> kvs;
    if (std::string e = etcd_wire::ReadTxn(a->body, &succeeded, &kvs); !e.empty())
      return Malformed(*a, call, e);
    if (succeeded) return true;
    if (kvs.size() != 1 || kvs[0].key != key)
      return Malformed(*a, call, "the compare failed but the key's range is not that one key");
    if (existing) *existing = std::move(kvs[0]);
    return false;
  }

  Result<bool> DeleteIfLease(const std::string& key, int64_t lease) override {
    if (key.empty()) return Status::InvalidArgument("etcd delete-if-lease: an empty key");
    const char* call = "txn (delete-if-lease)";
    Result<Answer> a = Call("/v3/kv/txn", call, etcd_wire::DeleteIfLeaseBody(key, lease));
    if (!a.ok()) return a.status();
    bool succeeded = false;
    std::vector<EtcdKv> kvs;
    if (std::string e = etcd_wire::ReadTxn(a->body, &succeeded, &kvs); !e.empty())
      return Malformed(*a, call, e);
    return succeeded;
  }

  Status Delete(const std::string& key) override {
    if (key.empty()) return Status::InvalidArgument("etcd delete: an empty key");
    Result<Answer> a = Call("/v3/kv/deleterange", "delete", etcd_wire::DeleteBody(key));
    if (!a.ok()) return a.status();
    return HasHeader(*a, "delete");
  }

  Result<int64_t> GrantLease(std::chrono::seconds ttl) override {
    if (ttl.count() <= 0) return Status::InvalidArgument("etcd lease grant: a TTL below 1 s");
    Result<Answer> a = Call("/v3/lease/grant", "lease grant", etcd_wire::GrantBody(ttl.count()));
    if (!a.ok()) return a.status();
    int64_t id = 0;
    if (std::string e = etcd_wire::ReadGrant(a->body, &id); !e.empty())
      return Malformed(*a, "lease grant", e);
    return id;
  }

  Result<int64_t> KeepAlive(int64_t lease) override {
    Result<Answer> a =
        Call("/v3/lease/keepalive", "lease keepalive", etcd_wire::LeaseIdBody(lease));
    if (!a.ok()) return a.status();
    int64_t ttl = 0;
    if (std::string e = etcd_wire::ReadKeepAlive(a->body, &ttl); !e.empty())
      return Malformed(*a, "lease keepalive", e);
    return ttl;
  }

  bool CanWatch() const override { return true; }

  Result<std::unique_ptr<EtcdWatch>> Watch(const std::string& prefix, int64_t from_revision,
                                           size_t max_value_bytes) override {
    const std::string body =
        DumpJson(etcd_wire::WatchCreateBody(prefix.empty() ? std::string(1, '\0') : prefix,
                                            etcd_wire::RangeEnd(prefix), from_revision));
    if (!options_.username.empty() && !Authenticated()) BERTH_RETURN_IF_ERROR(Authenticate());
    auto stream = transport_.OpenStream("/v3/watch", body, Token());
    if (!stream.ok()) return stream.status();
    return std::unique_ptr<EtcdWatch>(
        new GatewayWatch(this, std::move(stream).value(), max_value_bytes));
  }

 private:
  class GatewayWatch : public EtcdWatch {
   public:
    GatewayWatch(GatewayEtcd* etcd, std::unique_ptr<EtcdStream> stream, size_t max_value_bytes)
        : etcd_(etcd), stream_(std::move(stream)), max_value_bytes_(max_value_bytes) {}

    Result<EtcdWatchResult> Next(std::chrono::milliseconds window,
                                 const std::atomic<bool>* stop) override {
      const std::string where = "etcd " + stream_->endpoint() + " watch";
      if (!broken_.ok()) return broken_;
      EtcdWatchResult result;
      std::string problem;
      etcd_wire::EtcdError error;
      bool has_error = false;
      std::function<bool(std::string_view)> on_line = [&](std::string_view line) {
        json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded()) {
          problem = "a line that is not JSON: '" + Snippet(std::string(line)) + "'";
          return false;
        }
        if (etcd_wire::ReadError(j, &error)) {
          has_error = true;
          return false;
        }
        if (long status = stream_->status(); status != 200) {
          problem = "HTTP " + std::to_string(status) + " without an etcd error: '" +
                    Snippet(std::string(line)) + "'";
          return false;
        }
        etcd_wire::WatchMessage m;
        if (std::string e = etcd_wire::ReadWatchMessage(j, max_value_bytes_, &m); !e.empty()) {
          problem = e + ": '" + Snippet(std::string(line)) + "'";
          return false;
        }
        if (m.revision > 0) result.revision = m.revision;
        if (m.canceled) {
          if (m.compact_revision > 0) {
            // The revision asked for is gone: whatever changed since cannot be told.
            result.changed = result.compacted = true;
            ended_ = true;
          } else {
            problem = "etcd canceled the watch" +
                      (m.cancel_reason.empty() ? "" : " (" + EscapeLine(m.cancel_reason) + ")");
          }
          return false;
        }
        if (m.events.empty()) return true;  // created, or a progress notice
        result.changed = true;
        for (auto& e : m.events) result.events.push_back(std::move(e));
        return false;
      };
      if (ended_) return Status::Unavailable(where + ": the watch was canceled (compacted)");
      bool timed_out = false;
      Status read = stream_->Read(window, on_line, stop, &timed_out);
      // Then what already came, without waiting: one answer for a burst of changes.
      for (int more = 0; read.ok() && result.changed && !result.compacted && !has_error &&
                         problem.empty() && more < 4096;
           ++more) {
        size_t before = result.events.size();
        read = stream_->Read(std::chrono::milliseconds(0), on_line, nullptr, &timed_out);
        if (result.events.size() == before) break;
      }
      if (has_error) {
        broken_ = etcd_->FromEtcdError(where, error, !etcd_->options_.username.empty());
        return broken_;
      }
      if (!problem.empty()) {
        broken_ = Status::Internal(where + ": unexpected answer (" + problem +
                                   ") (is this endpoint etcd's client URL?)");
        return broken_;
      }
      if (result.changed) return result;
      if (!read.ok()) {
        broken_ = read.WithContext(where);
        return broken_;
      }
      return result;
    }

   private:
    GatewayEtcd* etcd_;
    std::unique_ptr<EtcdStream> stream_;
    size_t max_value_bytes_;
    Status broken_;
    bool ended_ = false;
  };

 public:
  Status Revoke(int64_t lease) override {
    Result<Answer> a = Call("/v3/lease/revoke", "lease revoke", etcd_wire::LeaseIdBody(lease),
                            /*not_found_ok=*/true);
    if (!a.ok()) return a.status();
    if (a->has_error) return Status::Ok();  // the lease was gone already
    return HasHeader(*a, "lease revoke");
  }

 private:
  static Status Malformed(const Answer& a, const std::string& call, const std::string& what) {
    return Status::Internal("etcd " + a.endpoint + " " + call + ": unexpected answer (" + what +
                            "): '" + Snippet(DumpJson(a.body)) +
                            "' (is this endpoint etcd's client URL?)");
  }

  static Status HasHeader(const Answer& a, const std::string& call) {
    if (!a.body.is_object() || !a.body.contains("header"))
      return Malformed(a, call, "no \"header\"");
    return Status::Ok();
  }

  std::string Token() {
    std::lock_guard<std::mutex> lock(mu_);
    return token_;
  }

  bool Authenticated() {
    std::lock_guard<std::mutex> lock(mu_);
    return authenticated_;
  }

  static bool IsTokenInvalid(const etcd_wire::EtcdError& e) {
    return e.grpc_code == kGrpcUnauthenticated ||
           e.message.find("invalid auth token") != std::string::npos;
  }

  /// POSTs once; parses the answer's JSON and any error etcd states in it.
  Result<Answer> PostOnce(const std::string& path, const std::string& call, const std::string& body,
                          const std::string& token, bool* too_long = nullptr) {
    Result<EtcdHttpAnswer> http = transport_.Post(path, body, token, call, too_long);
    if (!http.ok()) return http.status();
    Answer a;
    a.endpoint = http->endpoint;
    a.status = http->status;
    // A stream (keepalive) sends one JSON message per line: the first is the answer.
    std::string text = http->body.substr(0, http->body.find('\n'));
    a.body = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (a.body.is_discarded()) {
      return Status::Internal("etcd " + a.endpoint + " " + call + ": HTTP " +
                              std::to_string(a.status) + " with an answer that is not JSON: '" +
                              Snippet(http->body) + "' (is this endpoint etcd's client URL?)");
    }
    a.has_error = etcd_wire::ReadError(a.body, &a.error);
    if (a.status != 200 && !a.has_error) {
      return Status::Internal("etcd " + a.endpoint + " " + call + ": HTTP " +
                              std::to_string(a.status) + " without an etcd error: '" +
                              Snippet(http->body) + "' (is this endpoint etcd's client URL?)");
    }
    return a;
  }

  /// Fetches a token for options_.username. Ok with no token when etcd has auth disabled.
  Status Authenticate() {
    const std::string body =
        DumpJson(etcd_wire::AuthenticateBody(options_.username, options_.password));
    Result<Answer> a = PostOnce("/v3/auth/authenticate", "authenticate", body, "");
    if (!a.ok()) return a.status();
    std::string token;
    if (a->has_error) {
      if (a->error.grpc_code == kGrpcFailedPrecondition &&
          a->error.message.find("not enabled") != std::string::npos) {
        token.clear();  // auth is off in etcd: calls go without a token
      } else {
        return Status::PermissionDenied(
            "etcd " + a->endpoint + " refused user '" + options_.username +
            "': " + a->error.message +
            " (check the user name and the password file; without them berth cannot "
            "coordinate with the fleet)");
      }
    } else if (std::string e = etcd_wire::ReadToken(a->body, &token); !e.empty()) {
      return Malformed(*a, "authenticate", e);
    }
    std::lock_guard<std::mutex> lock(mu_);
    token_ = token;
    authenticated_ = true;
    return Status::Ok();
  }

  /// One call: authenticates first when needed, again once when etcd says the token is no
  /// longer valid; turns etcd's error answers into Status (NotFound passes when
  /// `not_found_ok`, for the caller to read has_error).
  Result<Answer> Call(const std::string& path, const std::string& call, const json& request,
                      bool not_found_ok = false, bool* too_long = nullptr) {
    const std::string body = DumpJson(request);
    bool auth = !options_.username.empty();
    if (auth) {
      bool need;
      {
        std::lock_guard<std::mutex> lock(mu_);
        need = !authenticated_;
      }
      if (need) BERTH_RETURN_IF_ERROR(Authenticate());
    }
    Result<Answer> a = PostOnce(path, call, body, Token(), too_long);
    if (auth && a.ok() && a->has_error && IsTokenInvalid(a->error)) {
      BERTH_RETURN_IF_ERROR(Authenticate());
      a = PostOnce(path, call, body, Token(), too_long);
    }
    if (!a.ok() || !a->has_error) return a;
    if (not_found_ok && a->error.grpc_code == kGrpcNotFound) return a;
    return FromEtcdError("etcd " + a->endpoint + " " + call, a->error, auth);
  }

  /// What etcd said went wrong, as a Status; `call` is "etcd ENDPOINT CALL".
  Status FromEtcdError(const std::string& call, const etcd_wire::EtcdError& e, bool auth) {
    std::string where = call + ": " + e.message;
    if (IsTokenInvalid(e) || e.grpc_code == kGrpcPermissionDenied ||
        e.message.find("user name is empty") != std::string::npos) {
      return Status::PermissionDenied(
          where + (auth ? " (user '" + options_.username + "' lacks the permission)"
                        : " (etcd has auth enabled: give berth a user name and password)"));
    }
    if (e.grpc_code == kGrpcResourceExhausted &&
        e.message.find("larger than max") != std::string::npos) {
      return Status::InvalidArgument(where + " (the request is over etcd's size limit)");
    }
    if (e.grpc_code == kGrpcUnavailable || e.grpc_code == kGrpcDeadlineExceeded ||
        e.grpc_code == kGrpcResourceExhausted) {
      return Status::Unavailable(where +
                                 " (etcd cannot serve now: no leader, overloaded or "
                                 "timed out; if this lasts, check etcd's health)");
    }
    switch (e.grpc_code) {
      case kGrpcNotFound:  // a lease that expired or was revoked
        return Status::NotFound(where);
      case kGrpcInvalidArgument:  // e.g. a request over etcd's size limit
        return Status::InvalidArgument(where);
      case kGrpcFailedPrecondition:
        return Status::FailedPrecondition(where);
      default:
        return Status::Internal(where + " (grpc code " + std::to_string(e.grpc_code) + ")");
    }
  }

  const EtcdOptions options_;
  EtcdTransport transport_;
  std::mutex mu_;
  std::string token_;
  bool authenticated_ = false;
};

}  // namespace

Result<std::unique_ptr<EtcdWatch>> Etcd::Watch(const std::string&, int64_t, size_t) {
  return Status::FailedPrecondition("this etcd client cannot watch");
}

Result<EtcdWatchResult> Etcd::WaitForChange(const std::string& prefix, int64_t from_revision,
                                            std::chrono::milliseconds window,
                                            size_t max_value_bytes, const std::atomic<bool>* stop) {
  auto watch = Watch(prefix, from_revision, max_value_bytes);
  if (!watch.ok()) return watch.status();
  return (*watch)->Next(window, stop);
}

Result<std::unique_ptr<Etcd>> ConnectEtcd(const EtcdOptions& options) {
  if (options.endpoints.empty())
    return Status::InvalidArgument(
        "etcd: no endpoint given (at least one of http://host:port, https://host:port, "
        "unix:///path/to/socket)");
  std::vector<EtcdEndpoint> endpoints;
  std::string problems;
  for (const std::string& text : options.endpoints) {
    Result<EtcdEndpoint> e = ParseEtcdEndpoint(text);
    if (e.ok()) {
      endpoints.push_back(*e);
    } else {
      problems += (problems.empty() ? "" : "; ") + e.status().message();
    }
  }
  if (options.cert_file.empty() != options.key_file.empty()) {
    problems += std::string(problems.empty() ? "" : "; ") + "etcd: " +
                (options.cert_file.empty() ? "key_file is set but cert_file is not"
                                           : "cert_file is set but key_file is not") +
                " (a client certificate needs both)";
  }
  if (options.timeout.count() <= 0) {
    problems += std::string(problems.empty() ? "" : "; ") + "etcd: the timeout is not positive";
  }
  if (!problems.empty()) return Status::InvalidArgument(problems);
  return std::unique_ptr<Etcd>(new GatewayEtcd(std::move(endpoints), options));
}

}  // namespace berth
