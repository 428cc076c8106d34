// The front: one HAProxy per public port that berth holds while the model servers behind it
// change (issue 22). A FrontSpec is what berth renders the front's configuration and unit from
// (planners/front_render.h) and what its admin seam acts on (providers/front/haproxy_admin.h).
//
// The model servers listen on loopback ports; the front owns the public port. A switch either
// routes new requests to the new server while the old one drains (make-before-break), or holds
// new requests (they wait, bodies and all) while the old server stops and the new one starts,
// answering 503 with Retry-After past a bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace berth {

/// One model server behind the front: a server of the front's backend.
struct FrontBackend {
  /// The server's name in HAProxy: the service's name ([A-Za-z0-9_.-], not "hold").
  std::string name;
  /// Where the model server listens (default loopback).
  std::string host = "127.0.0.1";
  /// Its internal port (required, 1..65535).
  int port = 0;
};

/// One name a routed front answers for (issue 41): a request whose JSON body's `model` is
/// exactly `served_name` goes to `server`. Several names may share one server (aliases).
struct RoutedModel {
  /// What clients send as `model` and GET /v1/models lists (vLLM's --served-model-name): user
  /// text, printable ASCII, 1..kMaxServedNameBytes bytes, not a JSON number (a request's number
  /// `model` reads as its text and would match it). Never written into the configuration as it
  /// is: hex-encoded in the match, \u-escaped in the JSON answers.
  std::string served_name;
  /// The model server; its name names the backend "model-NAME" (kRoutedBackendPrefix).
  FrontBackend server;
};

/// The longest served name a routed front takes.
inline constexpr size_t kMaxServedNameBytes = 200;
/// Why a routed front cannot serve `name` ("is a JSON number (...)"), or "" when it can: 1 to
/// kMaxServedNameBytes bytes of printable ASCII, not a JSON number.
std::string ServedNameProblem(const std::string& name);

/// The name of the front's hold server: the server that holds requests (FrontSpec::active).
inline constexpr const char* kFrontHoldServer = "hold";
/// The first line of every front configuration berth writes: "# berth-front-active: NAME".
inline constexpr const char* kFrontActiveLine = "# berth-front-active: ";
/// HAProxy's names in the rendered configuration (planners/front_render.h), which the admin
/// seam (providers/front/haproxy_admin.h) acts on.
inline constexpr const char* kFrontProxy = "front";         // the public frontend
inline constexpr const char* kFrontBackend = "models";      // the model servers and `hold`
inline constexpr const char* kFrontReadyBackend = "ready";  // its one server, also "ready"
inline constexpr const char* kFrontHoldProxy = "hold";      // the hold loop's frontend
/// A routed front's backend for server NAME: "model-NAME" (its server and `hold`).
inline constexpr const char* kRoutedBackendPrefix = "model-";

struct FrontSpec {
  /// The public port the front listens on (required, 1..65535).
  int port = 0;
  /// The address it listens on (default every IPv4 address).
  std::string bind = "0.0.0.0";
  /// How long a request is held while no model server serves (default 10 minutes); past it,
  /// 503 with Retry-After. Rounded up to whole seconds (one hold round is a second).
  uint64_t hold_ms = 600000;
  /// How long an old HAProxy worker may keep its connections after a reload (hard-stop-after;
  /// default 2 minutes): the streams it carries get this long to finish.
  uint64_t drain_ms = 120000;
  /// The Retry-After value (seconds) of the 503 answered past the hold bound (default 30).
  uint64_t retry_after_s = 30;
  /// How long a request or a stream may stay silent either way before the front closes it
  /// (timeout client / server / tunnel; default 1 hour: a long SSE stream, a long completion).
  uint64_t idle_ms = 3600000;
  /// HAProxy's buffer size (tune.bufsize; default 512 KiB). A request is replayed on a retry
  /// (hold) only if it fits in one buffer: a JSON body of up to about this size minus 1 KiB.
  /// Each active connection may take two buffers.
  uint64_t buffer_bytes = 524288;
  /// The most connections the front accepts at once (global maxconn; default 4096).
  int max_connections = 4096;
  /// A path an outside load balancer asks (GET), e.g. "/berth/ready": 200 while `ready`, 503
  /// while berth says draining. "" (default): none.
  std::string ready_path;
  /// What the ready path answers at (re)load (default true: 200).
  bool ready = true;
  /// The server served at (re)load: one of `backends`' names, or "hold" (requests are held),
  /// or "" (default: every server in maintenance, requests answered 503 at once).
  std::string active;
  /// The model servers (names unique).
  std::vector<FrontBackend> backends;
  /// A front that routes by the request's model (`route: model`, issue 41): every model of
  /// `models` is served at once (planners/front_render.h RenderRoutedFrontConfig); `backends`
  /// and `active` are then empty.
  bool routed = false;
  std::vector<RoutedModel> models;
  /// The admin (stats) socket berth's FrontControl speaks to (FrontAdminSocket(port)).
  std::string admin_socket;
  /// The master CLI socket of the master-worker process: `reload`, `show proc`
  /// (FrontMasterSocket(port)).
  std::string master_socket;
  /// The master's pid file (FrontPidFile(port)).
  std::string pid_file;
  /// The unix socket of the front's hold loop (FrontHoldSocket(port)): a path in the front's
  /// own folder, which no other user can bind first (an abstract name could be taken by anyone,
  /// and the front would not start).
  std::string hold_socket;
};

/// "berth-front-8000.service".
std::string FrontUnitName(int port);
/// The front's runtime directory: "/run/berth/front-8000" (the unit's RuntimeDirectory).
std::string FrontRuntimeDir(int port);
/// FrontRuntimeDir(port) + "/admin.sock".
std::string FrontAdminSocket(int port);
/// FrontRuntimeDir(port) + "/master.sock".
std::string FrontMasterSocket(int port);
/// FrontRuntimeDir(port) + "/haproxy.pid".
std::string FrontPidFile(int port);
/// The longest path a unix socket address holds (sun_path less its terminating NUL).
inline constexpr size_t kMaxUnixSocketPath = 107;
/// FrontRuntimeDir(port) + "/hold.sock".
std::string FrontHoldSocket(int port);
/// A spec for `port` with the default paths above filled in; the rest as declared.
FrontSpec DefaultFrontSpec(int port);

/// A word HAProxy's parser takes as one argument with no meaning of its own (and a unit's
/// ExecStart= as one word): printable ASCII, 1-200 bytes, no space, quote, backslash, '#', '$'
/// (environment variables) or '%'.
bool IsPlainFrontWord(const std::string& s);

/// Whether `bind` is one address the front may listen on: an IPv4 address, an IPv6 address
/// (bare or in brackets), or a host name (letters, digits, '-' and '.', not all digits). Never
/// a list, a port range, a path or one of HAProxy's address prefixes (unix@, abns@, fd@ ...),
/// each of which HAProxy would take as more than one address.
bool IsFrontBindAddress(const std::string& bind);
/// `bind` as the host part of HAProxy's `bind ADDRESS:PORT` (an IPv6 address without brackets:
/// HAProxy takes the last ':' as the port's).
std::string FrontBindHost(const std::string& bind);

/// Every problem of `spec`, one per line ("" when none): ports out of range, names HAProxy
/// would not take or that would change the configuration's meaning (spaces, newlines, '#'),
/// duplicate names, an `active` that is not a backend nor "hold", a ready path that is not a
/// plain absolute path, empty socket paths, zero sizes.
std::string FrontSpecProblems(const FrontSpec& spec);

}  // namespace berth
