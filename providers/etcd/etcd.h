// etcd v3 through its JSON gateway (POST /v3/kv/range, /v3/kv/put, /v3/kv/txn,
// /v3/kv/deleterange, /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke,
// /v3/auth/authenticate) over libcurl: the fleet's coordination store. Keys and values are bytes
// (base64 on the wire, done here). Everything etcd answers is untrusted: a malformed answer is an
// error naming the endpoint and the call, never an exception.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace berth {

/// What a client sent and read, counted by its transport (a fleet's cost to etcd, measured by
/// tests/engine/fleet_simulation_test.cc): one request per HTTP exchange (a watch is one), the
/// answer bytes as read (headers left out).
struct EtcdTraffic {
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> watches{0};
  std::atomic<uint64_t> bytes_read{0};
};

struct EtcdOptions {
  /// "http://host:port", "https://host:port" or "unix:///path/to/socket" (plain HTTP over a
  /// unix socket). Tried in order: a request that cannot reach one endpoint goes to the next.
  std::vector<std::string> endpoints;
  std::string ca_file;    // https: the CA that signs the server's certificate ("" = system CAs)
  std::string cert_file;  // https: a client certificate and its key (both or neither)
  std::string key_file;
  /// With auth enabled in etcd: a token from /v3/auth/authenticate, sent as the Authorization
  /// header, fetched again when etcd says it expired. "" = no auth.
  std::string username;
  std::string password;
  std::chrono::milliseconds timeout{std::chrono::seconds(5)};  // per request, connect included
  /// When set, counts what this client sends and reads (shared between clients to add up).
  std::shared_ptr<EtcdTraffic> traffic;
};

/// One key as etcd stores it.
struct EtcdKv {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;  // 0: none
  /// The value was not kept: it is larger than the range's max_value_bytes, or so large that
  /// an answer holding it alone passes what berth reads of one answer (16 MiB). `value` is empty.
  bool too_large = false;
};

/// How a watch ended (Etcd::WaitForChange).
struct EtcdWatchResult {
  /// Keys under the prefix changed at or after the revision asked for: `events` holds them in
  /// order. False: the window ran out, or a stop was asked, with no change.
  bool changed = false;
  /// etcd compacted away the revision asked for: changes may have been missed, so read again.
  bool compacted = false;
  /// The store's revision as of the last message etcd sent (0: none said).
  int64_t revision = 0;
  struct Event {
    bool deleted = false;  // else a put
    EtcdKv kv;             // a delete: the key and mod_revision only
  };
  std::vector<Event> events;
};

/// The calls berth makes. Errors: Status::Unavailable when no endpoint answered (the message
/// names each endpoint and why), PermissionDenied for auth failures, Internal for an answer
/// that is not what etcd sends (the endpoint and the call named). Errors etcd itself states
/// keep their kind: NotFound for a lease that no longer exists (Put or CreateIfAbsent
/// attached to an expired lease), InvalidArgument (a request over etcd's size limit),
/// FailedPrecondition.
class Etcd {
 public:
  virtual ~Etcd() = default;
  /// Every key that starts with `prefix` (sorted by key), at most `limit` (0: no limit), read
  /// in pages so that no answer passes what berth reads of one. A value larger than
  /// `max_value_bytes` (0: no bound) is not kept: its key comes back with too_large set, so
  /// one oversized key cannot make the whole range fail nor fill berth's memory.
  /// `revision`, when not null, gets the store's revision the keys were read at (pages after
  /// the first are read at the first's revision: one consistent view).
  virtual Result<std::vector<EtcdKv>> Range(const std::string& prefix, int64_t limit = 0,
                                            size_t max_value_bytes = 0,
                                            int64_t* revision = nullptr) = 0;
  /// One key, nullopt when absent.
  virtual Result<std::optional<EtcdKv>> Get(const std::string& key) = 0;
  /// Puts `value` at `key`, attached to `lease` (0: none).
  virtual Status Put(const std::string& key, const std::string& value, int64_t lease = 0) = 0;
  /// In one transaction: creates `key` (attached to `lease`) only if it does not exist. True:
  /// created; false: it existed, and `*existing` (when not null) is what it holds.
  virtual Result<bool> CreateIfAbsent(const std::string& key, const std::string& value,
                                      int64_t lease, EtcdKv* existing = nullptr) = 0;
  /// In one transaction: deletes `key` only while it is attached to `lease`. True: deleted.
  virtual Result<bool> DeleteIfLease(const std::string& key, int64_t lease) = 0;
  virtual Status Delete(const std::string& key) = 0;
  /// A new lease of `ttl`; its ID.
  virtual Result<int64_t> GrantLease(std::chrono::seconds ttl) = 0;
  /// Renews `lease` once: the seconds it has left, 0 when it no longer exists (expired or
  /// revoked: everything attached to it is gone).
  virtual Result<int64_t> KeepAlive(int64_t lease) = 0;
  /// Ends `lease` now; its keys are deleted. A lease that no longer exists is not an error.
  virtual Status Revoke(int64_t lease) = 0;
  /// Opens a watch of every key under `prefix` from `from_revision` (etcd v3's streamed
  /// watch: one POST /v3/watch kept open); changes wait for EtcdWatch::Next. A value over
  /// `max_value_bytes` (0: no bound) comes back too_large, as in Range.
  virtual Result<std::unique_ptr<class EtcdWatch>> Watch(const std::string& prefix,
                                                         int64_t from_revision,
                                                         size_t max_value_bytes = 0);
  /// One watch, one wait: Watch, then Next.
  Result<EtcdWatchResult> WaitForChange(const std::string& prefix, int64_t from_revision,
                                        std::chrono::milliseconds window,
                                        size_t max_value_bytes = 0,
                                        const std::atomic<bool>* stop = nullptr);
  /// Whether Watch is there (false: the caller polls; an in-memory etcd of tests).
  virtual bool CanWatch() const { return false; }
};

/// An open watch (Etcd::Watch).
class EtcdWatch {
 public:
  virtual ~EtcdWatch() = default;
  /// Returns at the next changes (all those that came while nobody asked, up to a few
  /// thousand), when
  /// `window` passes, or within 100 ms of `*stop` (when not null) turning true; the last two
  /// with changed false. Errors as Etcd's calls; a watch that broke off (the connection
  /// dropped, the server ended or canceled it) is Unavailable, and is done: open another.
  virtual Result<EtcdWatchResult> Next(std::chrono::milliseconds window,
                                       const std::atomic<bool>* stop = nullptr) = 0;
};

/// The client for `options` (checked here: at least one endpoint, each a well-formed URL of an
/// allowed scheme, cert and key both or neither). Connects lazily, on the first call.
Result<std::unique_ptr<Etcd>> ConnectEtcd(const EtcdOptions& options);

}  // namespace berth
