// Rendering the front (core/front.h): HAProxy's configuration and the systemd unit that
// runs it. Pure and deterministic: the same spec gives the same bytes.
//
// What the configuration does, verified against HAProxy 2.6.12 (Debian 12) by
// tests/providers/front_haproxy_test.cc:
//  - One backend, `models`, with a server per model server (named after its service) and a
//    `hold` server. Which server is ready is the switch's state: at (re)load FrontSpec::active
//    is ready and every other server starts `disabled` (maintenance); at run time berth changes
//    states over the admin socket (providers/front/haproxy_admin.h). No health checks: a server
//    that checks DOWN makes HAProxy answer 503 at once, and berth's gates judge health.
//  - Hold. A server whose connect fails does NOT hold a request: HAProxy waits its turn-around
//    (min(timeout connect, 1 s)) only after an asynchronous connect error, and a loopback TCP
//    port or unix socket nobody listens on fails synchronously, so all retries are spent in a
//    few milliseconds (measured: 10 retries in 8 ms). Instead `hold` points at a second
//    frontend of the same process (abstract socket) that tarpits each request for one second and
//    answers 425; the backend retries on 425 (`retry-on conn-failure 425`, L7 retries, which
//    replay the buffered request, body included) and re-picks a server on every retry
//    (`option redispatch 1`), so a held request goes to the server routed to within a second.
//    N retries hold about N+1 seconds; after the last, the 425 becomes a 503 with Retry-After.
//    A request larger than one buffer (FrontSpec::buffer_bytes) cannot be replayed: held, it
//    gets that 503 after one round.
//  - Server states set over the admin socket do not survive a reload (the new worker reads
//    the file): berth renders the state it wants (active, ready) before it reloads.
//  - Reloads: master-worker mode; the master passes the listening sockets to the new worker
//    over its socketpair (2.6 needs no -x then; expose-fd listeners is kept for a manual -x),
//    and the old worker finishes its streams, bounded by hard-stop-after (drain_ms). At start
//    and at each reload the master re-executes itself; meanwhile its CLI refuses connections
//    and SIGUSR2 is ignored, so a reload asked then is lost: berth reloads with
//    HaproxyMaster::Reload (providers/front), which confirms it by `show proc`'s counter. The
//    unit's ExecReload (SIGUSR2, as Debian's haproxy.service) is for an operator.
//  - `retries`: HAProxy reads it with atol() into an int and checks no bound; berth renders at
//    most kFrontMaxRetries. N retries hold about N + 1 seconds (measured: 2 s of hold_ms gives
//    a 503 with Retry-After after about 2.2 s).
//  - The ready path answers from the number of usable servers of a one-server backend `ready`
//    (`nbsrv(ready)`), flipped with `set server ready/ready state` (no map file, no
//    experimental-mode `set var`).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/front.h"
#include "core/status.h"

namespace berth {

/// The path the front answers 200 on while it runs (HAProxy's monitor-uri), whatever it routes
/// to: its health gate. The same as kFrontMonitorPath (core/desired.h).
inline constexpr const char* kFrontMonitorUri = "/berth/front";

/// The length of one hold round (the hold loop's `timeout tarpit`), in milliseconds.
inline constexpr uint64_t kFrontHoldRoundMs = 1000;
/// The most retries berth renders (one day of hold rounds). HAProxy 2.6 reads `retries` with
/// atol() into an int and checks no bound (cfgparse-listen.c), so the limit is berth's own.
inline constexpr uint64_t kFrontMaxRetries = 86400;

/// `retries` for `hold_ms`: one per hold round after the first, at least 1.
uint64_t FrontRetries(uint64_t hold_ms);

/// The HAProxy configuration of `spec`, or InvalidArgument listing FrontSpecProblems; of a
/// routed one (FrontSpec::routed), RenderRoutedFrontConfig(spec, spec.models).
Result<std::string> RenderHaproxyConfig(const FrontSpec& spec);

/// Every problem of `models` for a routed front on `spec`, one per line ("" when none): a served
/// name twice or not printable ASCII, a server named twice with different addresses,
/// and FrontSpecProblems of `spec` with the models' servers as its backends. `spec.backends` and
/// `spec.active` must be empty: a routed front takes its servers from `models`.
std::string RoutedFrontProblems(const FrontSpec& spec, const std::vector<RoutedModel>& models);

/// The body of the routed front's GET /v1/models: OpenAI's list as vLLM answers it,
/// {"object":"list","data":[{"id":NAME,"object":"model","owned_by":"berth"},...]}, in the
/// order of `models`, each name once.
std::string RoutedModelListJson(const std::vector<RoutedModel>& models);

/// The HAProxy configuration of a front that serves several models on `spec.port`, routed by
/// the `model` of the request's JSON body (chat, completions, embeddings: any request but the
/// ones below), or InvalidArgument listing RoutedFrontProblems. The global and defaults
/// sections, the front's health and ready paths, the hold loop and the admin socket are those
/// of RenderHaproxyConfig; each server gets a holding backend of its own ("model-NAME": its
/// server ready, `hold` in maintenance), whose states the admin socket can change as it does
/// `models`'. Verified against HAProxy 2.6.12 by tests/providers/model_router_test.cc:
///  - `option http-buffer-request` in the frontend: the rules run once the whole body is in,
///    or once one buffer (tune.bufsize, FrontSpec::buffer_bytes, less about 1 KiB and the
///    headers) is full. The `model` is `req.body,json_query('$.model')`: a string (JSON escapes
///    read, except "\/", which makes mjson find nothing, and \uXXXX past 0x7F, read as one
///    Latin-1 byte), a number as its text, true/false as a boolean that matches no name,
///    null/a list/an object as nothing; with duplicate keys the first (Python's json takes
///    the last). It is found in a body cut at the buffer when it comes before the cut.
///  - GET /v1/models answers the list (RoutedModelListJson) from HAProxy itself, whether the
///    servers run or not.
///  - No `model` found: 413 when the body was longer than what was read (Content-Length past
///    the buffer: `model` may be beyond it), else 400. A `model` no name matches: 404 naming
///    it (cut at 100 bytes, JSON-escaped by HAProxy's json converter) and the served names.
///    Each is OpenAI's error object: {"error":{"message","type":"invalid_request_error",
///    "param":"model","code"}}, code "model_not_found" for the 404.
///  - Responses pass as they come (streams are not buffered): only the request is.
Result<std::string> RenderRoutedFrontConfig(const FrontSpec& spec,
                                            const std::vector<RoutedModel>& models);

/// The unit (FrontUnitName(spec.port)) that runs HAProxy in master-worker mode on
/// `config_path`: Type=notify (-Ws), the configuration checked before a start and a reload,
/// a reload by SIGUSR2 to the master (which passes the listening sockets to the new worker),
/// KillMode=mixed. berth's header first (marker, spec hash), as for service units. Paths
/// with characters a unit or HAProxy would read differently give InvalidArgument.
Result<std::string> RenderFrontUnit(const FrontSpec& spec, const std::string& config_path,
                                    const std::string& haproxy_path = "/usr/sbin/haproxy");

}  // namespace berth
