// etcd v3's JSON gateway, as bodies to send and answers to read: pure functions, no I/O, so
// that every shape etcd (or something pretending to be etcd) sends is tested without a server.
// Requests use the proto field names; 64-bit numbers go as JSON strings (etcd sends them so).
// Answers follow proto3: a field at its default (0, false, empty) is left out.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "providers/etcd/etcd.h"

namespace berth::etcd_wire {

/// The range_end that selects every key starting with `prefix`: the prefix with its last byte
/// plus one, trailing 0xff bytes dropped first; "\0" (every key) for "" or an all-0xff prefix.
std::string RangeEnd(std::string_view prefix);

/// A range from `key` to `range_end` of at most `limit` keys (0: all); `keys_only`: without
/// their values.
nlohmann::json RangeBody(const std::string& key, const std::string& range_end, int64_t limit,
                         bool keys_only = false, int64_t revision = 0);
/// A watch's create_request for the keys from `key` to `range_end` from `start_revision`.
nlohmann::json WatchCreateBody(const std::string& key, const std::string& range_end,
                               int64_t start_revision);
nlohmann::json PutBody(const std::string& key, const std::string& value, int64_t lease);
nlohmann::json DeleteBody(const std::string& key);
/// Txn: compare CREATE createRevision == 0, success put (with lease), failure range of the key.
nlohmann::json CreateIfAbsentBody(const std::string& key, const std::string& value, int64_t lease);
/// Txn: compare LEASE == lease, success delete of the key.
nlohmann::json DeleteIfLeaseBody(const std::string& key, int64_t lease);
nlohmann::json GrantBody(int64_t ttl_seconds);
nlohmann::json LeaseIdBody(int64_t lease);  // keepalive, revoke
nlohmann::json AuthenticateBody(const std::string& name, const std::string& password);

// Readers: "" when `answer` has the expected shape, else what is wrong with it.

/// The "kvs" of a range answer (absent: none), keys and values decoded.
std::string ReadKvs(const nlohmann::json& answer, std::vector<EtcdKv>* kvs);
/// A range answer's "more" (absent: false): keys past its limit remain.
std::string ReadMore(const nlohmann::json& answer, bool* more);
/// A txn answer: "succeeded" (absent: false) and, when a response_range is among "responses",
/// its kvs.
std::string ReadTxn(const nlohmann::json& answer, bool* succeeded, std::vector<EtcdKv>* kvs);
/// A lease grant answer: its "ID" (never 0) and "TTL".
std::string ReadGrant(const nlohmann::json& answer, int64_t* id);
/// One message of the keepalive stream ({"result": {...}}): the TTL left, 0 when the lease is
/// gone (etcd then leaves TTL out). An {"error": {...}} message is for ReadError.
std::string ReadKeepAlive(const nlohmann::json& message, int64_t* ttl);
/// The "revision" of an answer's "header" (absent: 0).
std::string ReadHeaderRevision(const nlohmann::json& answer, int64_t* revision);
/// One message of a watch stream ({"result": {...}}): whether the watch was created or
/// canceled (with compact_revision when etcd compacted the revision asked for), its header's
/// revision and its events (kv.key and kv.value decoded; "type": "DELETE" or absent, a put).
/// A message whose values pass `max_value_bytes` (0: no bound) keeps their keys, too_large.
struct WatchMessage {
  bool created = false;
  bool canceled = false;
  int64_t compact_revision = 0;
  std::string cancel_reason;
  int64_t revision = 0;
  std::vector<EtcdWatchResult::Event> events;
};
std::string ReadWatchMessage(const nlohmann::json& message, size_t max_value_bytes,
                             WatchMessage* out);
/// An authenticate answer: its non-empty "token".
std::string ReadToken(const nlohmann::json& answer, std::string* token);

/// What etcd said went wrong: {"error": "...", "code": N} of a unary call, or
/// {"error": {"grpc_code": N, "message": "..."}} inside a stream. False when `answer` is
/// neither.
struct EtcdError {
  int grpc_code = 0;  // 0: not given
  std::string message;
};
bool ReadError(const nlohmann::json& answer, EtcdError* error);

/// A 64-bit integer field sent as a JSON string or number; absent → 0. "" or what is wrong.
std::string ReadInt64(const nlohmann::json& object, const char* field, int64_t* out);

}  // namespace berth::etcd_wire
