// Etcd through the v3 JSON gateway: request bodies and answers (etcd_wire), transport and
// failover (etcd_transport), auth tokens and etcd's errors turned into Status here.
#include <algorithm>
#include <mutex>
#include <nlohmann/json.hpp>

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

bool TokenInvalid(const Answer& a) {
  return a.has_error && (a.error.grpc_code == kGrpcUnauthenticated ||
                         a.error.message.find("invalid auth token") != std::string::npos);
}

class GatewayEtcd : public Etcd {
 public:
  /// Keys per range request at first (a fleet's reports are a KiB or two each).
  static constexpr int64_t kRangePageKeys = 256;

  GatewayEtcd(std::vector<EtcdEndpoint> endpoints, const EtcdOptions& options)
      : options_(options), transport_(std::move(endpoints), options) {}

  Result<std::vector<EtcdKv>> Range(const std::string& prefix, int64_t limit,
                                    size_t max_value_bytes) override {
    if (limit < 0) return Status::InvalidArgument("etcd range: a negative limit");
    const std::string end = etcd_wire::RangeEnd(prefix);
    std::string from = prefix.empty() ? std::string(1, '\0') : prefix;
    std::vector<EtcdKv> out;
    auto full = [&] { return limit > 0 && static_cast<int64_t>(out.size()) >= limit; };
    // Keys per request: halved (for the rest of the range) while an answer is too long.
    int64_t page = kRangePageKeys;
    for (;;) {
      int64_t want = limit > 0 ? std::min(page, limit - static_cast<int64_t>(out.size())) : page;
      bool too_long = false;
      Result<Answer> a = Call("/v3/kv/range", "range", etcd_wire::RangeBody(from, end, want),
                              /*not_found_ok=*/false, &too_long);
      if (!a.ok() && too_long && want > 1) {
        page = std::max<int64_t>(1, want / 2);
        continue;
      }
      if (!a.ok() && too_long) {
        // One value alone is larger than an answer may be: its key, without it.
        Result<Answer> k =
            Call("/v3/kv/range", "range", etcd_wire::RangeBody(from, end, 1, /*keys_only=*/true));
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
    if (auth && a.ok() && TokenInvalid(*a)) {
      BERTH_RETURN_IF_ERROR(Authenticate());
      a = PostOnce(path, call, body, Token(), too_long);
    }
    if (!a.ok() || !a->has_error) return a;
    const etcd_wire::EtcdError& e = a->error;
    std::string where = "etcd " + a->endpoint + " " + call + ": " + e.message;
    if (not_found_ok && e.grpc_code == kGrpcNotFound) return a;
    if (TokenInvalid(*a) || e.grpc_code == kGrpcPermissionDenied ||
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
