#include "planners/front_render.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <vector>

#include "core/hash.h"
#include "core/unit_marker.h"
#include "planners/unit_syntax.h"

namespace berth {

uint64_t FrontRetries(uint64_t hold_ms) {
  uint64_t rounds = (hold_ms + kFrontHoldRoundMs - 1) / kFrontHoldRoundMs;
  if (rounds < 2) return 1;
  return rounds - 1 > kFrontMaxRetries ? kFrontMaxRetries : rounds - 1;
}

namespace {

std::string Ms(uint64_t ms) { return std::to_string(ms) + "ms"; }

/// A path for an ExecStart= word and a HAProxy argument: absolute, and a plain word.
bool IsPlainPath(const std::string& s) { return !s.empty() && s[0] == '/' && IsPlainFrontWord(s); }

}  // namespace

namespace {

/// The file's first line, `global` and `defaults`: the same in both layouts.
void RenderGlobalAndDefaults(const FrontSpec& spec, std::ostream& c) {
  c << "# Managed by berth: the front of port " << spec.port << " (" << FrontUnitName(spec.port)
    << "). berth rewrites this file.\n";
  c << "global\n";
  c << "  # A master and workers: a reload starts a new worker that gets the listening sockets\n"
       "  # from the master (no refused connection) while the old one finishes its streams.\n";
  c << "  master-worker\n";
  c << "  # berth's admin socket (server states, show stat). expose-fd listeners also lets a\n"
       "  # `haproxy -x` started outside the master take the listeners.\n";
  c << "  stats socket " << spec.admin_socket << " mode 600 level admin expose-fd listeners\n";
  c << "  # An admin connection idle this long is closed.\n";
  c << "  stats timeout 10s\n";
  c << "  # An old worker left by a reload exits at the latest this long after it.\n";
  c << "  hard-stop-after " << Ms(spec.drain_ms) << "\n";
  c << "  maxconn " << spec.max_connections << "\n";
  c << "  # A request is replayed by a retry (a held request) only when it fits in one buffer.\n";
  c << "  tune.bufsize " << spec.buffer_bytes << "\n";
  c << "\n";
  c << "defaults\n";
  c << "  mode http\n";
  c << "  # Loopback connects are immediate; 1 s covers a dropped SYN (a full accept queue).\n";
  c << "  timeout connect 1s\n";
  c << "  # A stream (SSE) or a long completion may be silent this long either way.\n";
  c << "  timeout client " << Ms(spec.idle_ms) << "\n";
  c << "  timeout server " << Ms(spec.idle_ms) << "\n";
  c << "  timeout tunnel " << Ms(spec.idle_ms) << "\n";
  c << "  # A client has 30 s to send its headers and, buffered, its body.\n";
  c << "  timeout http-request 30s\n";
  c << "  # An idle keep-alive client connection is closed after 10 s.\n";
  c << "  timeout http-keep-alive 10s\n";
  c << "  # Each token of a stream is sent as it comes (TCP_NODELAY, no MSG_MORE): by default\n"
       "  # HAProxy asks the kernel to wait for more data, which held a stream's first token\n"
       "  # 40-200 ms (tests/bench/on_demand: 78 ms warm through a front, 21 ms without).\n";
  c << "  option http-no-delay\n";
  c << "\n";
}

/// The public frontend's first lines: its bind, the front's own health and the ready path.
void RenderFrontendHead(const FrontSpec& spec, std::ostream& c) {
  c << "frontend " << kFrontProxy << "\n";
  c << "  bind " << FrontBindHost(spec.bind) << ":" << spec.port << "\n";
  c << "  # The front's own health (berth's health gate of berth-front-PORT): 200 while it runs.\n";
  c << "  monitor-uri " << kFrontMonitorUri << "\n";
  if (!spec.ready_path.empty()) {
    c << "  # The ready path: 503 while berth says draining (server ready/ready in maintenance).\n";
    c << "  http-request return status 503 content-type text/plain string draining if { path "
      << spec.ready_path << " } !{ nbsrv(" << kFrontReadyBackend << ") gt 0 }\n";
    c << "  http-request return status 200 content-type text/plain string ready if { path "
      << spec.ready_path << " }\n";
  }
}

/// One server line of a backend.
struct ServerLine {
  std::string name;
  std::string address;
  bool ready;
};

/// A backend of model servers and the hold server: buffered requests, retried on a failed
/// connect and after each hold round, past the hold bound a 503 with Retry-After.
void RenderHoldingBackend(const FrontSpec& spec, const std::string& name,
                          const std::vector<ServerLine>& servers, std::ostream& c) {
  c << "backend " << name << "\n";
  c << "  balance roundrobin\n";
  c << "  # Wait for the body (up to a buffer) before connecting: the whole request can be\n"
       "  # replayed on a retry.\n";
  c << "  option http-buffer-request\n";
  c << "  # Retry when the connect fails, and when a hold round ends (the hold loop's 425).\n";
  c << "  retry-on conn-failure 425\n";
  c << "  # One retry per hold round: about " << FrontRetries(spec.hold_ms) + 1
    << " s of hold, then 503.\n";
  c << "  retries " << FrontRetries(spec.hold_ms) << "\n";
  c << "  # Pick a server again on every retry: a held request goes to the server routed to.\n";
  c << "  option redispatch 1\n";
  c << "  # Past the hold bound: the last round's 425 becomes a 503 with Retry-After.\n";
  c << "  http-response return status 503 content-type text/plain string held-too-long hdr "
       "Retry-After "
    << spec.retry_after_s << " if { status 425 }\n";
  c << "  # HAProxy's own 503 (no server ready, every retry failed) says when to come back.\n";
  c << "  http-error status 503 content-type text/plain string no-model-server hdr Retry-After "
    << spec.retry_after_s << "\n";
  c << "  # No health checks: a server checked DOWN would make HAProxy answer 503 at once.\n";
  for (const ServerLine& s : servers)
    c << "  server " << s.name << " " << s.address << (s.ready ? "" : " disabled") << "\n";
  c << "\n";
}

/// The `ready` backend (the ready path's switch) and the hold loop's frontend.
void RenderReadyAndHold(const FrontSpec& spec, std::ostream& c) {
  const std::string hold_addr = "unix@" + spec.hold_socket;
  c << "backend " << kFrontReadyBackend << "\n";
  c << "  # Never connected to: its one server's state is the ready path's answer.\n";
  c << "  server " << kFrontReadyBackend << " " << hold_addr << (spec.ready ? "" : " disabled")
    << "\n";
  c << "\n";
  c << "frontend " << kFrontHoldProxy << "\n";
  c << "  # The hold loop: each request waits one round, then 425 sends it back to be retried.\n";
  c << "  bind " << hold_addr << " mode 600\n";
  c << "  timeout tarpit " << Ms(kFrontHoldRoundMs) << "\n";
  c << "  http-request tarpit deny_status 425\n";
}

}  // namespace

Result<std::string> RenderHaproxyConfig(const FrontSpec& spec) {
  if (spec.routed) return RenderRoutedFrontConfig(spec, spec.models);
  std::string problems = FrontSpecProblems(spec);
  if (!problems.empty()) return Status::InvalidArgument(problems);
  std::vector<ServerLine> servers;
  for (const FrontBackend& b : spec.backends)
    servers.push_back({b.name, b.host + ":" + std::to_string(b.port), spec.active == b.name});
  servers.push_back(
      {kFrontHoldServer, "unix@" + spec.hold_socket, spec.active == kFrontHoldServer});
  std::ostringstream c;
  RenderGlobalAndDefaults(spec, c);
  RenderFrontendHead(spec, c);
  c << "  default_backend " << kFrontBackend << "\n";
  c << "\n";
  RenderHoldingBackend(spec, kFrontBackend, servers, c);
  RenderReadyAndHold(spec, c);
  return c.str();
}

namespace {

/// `s` as the inside of a JSON string that is also safe inside a single-quoted HAProxy word
/// and a log-format string: letters, digits and " -._:/@+" as they are, every other byte as
/// \u00XX (no quote, backslash, '%', '$' or '#' of the user's reaches the configuration).
std::string JsonText(const std::string& s) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || (ch != 0 && std::strchr(" -._:/@+", ch))) {
      out += static_cast<char>(ch);
    } else {
      out += "\\u00";
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}

/// The bytes of `s` as upper-case hex digits, as HAProxy's `hex` converter writes them.
std::string Hex(const std::string& s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    out += kHex[ch >> 4];
    out += kHex[ch & 15];
  }
  return out;
}

/// OpenAI's error object; `message` already JsonText, `code` a JSON value.
std::string OpenAiError(const std::string& message, const std::string& code) {
  return R"({"error":{"message":")" + message +
         R"(","type":"invalid_request_error","param":"model","code":)" + code + "}}";
}

/// The models' servers, each once, in the order of `models`.
std::vector<FrontBackend> RoutedServers(const std::vector<RoutedModel>& models) {
  std::vector<FrontBackend> servers;
  for (const RoutedModel& m : models) {
    bool seen = false;
    for (const FrontBackend& s : servers) seen = seen || s.name == m.server.name;
    if (!seen) servers.push_back(m.server);
  }
  return servers;
}

}  // namespace

std::string RoutedFrontProblems(const FrontSpec& spec, const std::vector<RoutedModel>& models) {
  std::string out;
  auto problem = [&out](const std::string& p) { out += p + "\n"; };
  if (!spec.backends.empty())
    problem("a routed front takes its servers from its models, not from backends");
  if (!spec.active.empty()) problem("a routed front has no active server: every model is served");
  std::set<std::string> names;
  std::map<std::string, const FrontBackend*> servers;
  for (const RoutedModel& m : models) {
    const std::string& n = m.served_name;
    // Appended piecewise: g++ 12 warns falsely (-Wrestrict) of "x" + std::string&& at -O3.
    std::string shown = "'";
    shown.append(JsonText(n.substr(0, kMaxServedNameBytes))).append("'");
    if (std::string why = ServedNameProblem(n); !why.empty())
      problem("served name " + shown + " " + why);
    if (!names.insert(n).second) problem("served name " + shown + " is served twice");
    auto [at, inserted] = servers.emplace(m.server.name, &m.server);
    if (!inserted && (at->second->host != m.server.host || at->second->port != m.server.port))
      problem("front backend '" + m.server.name + "' is given two addresses");
  }
  FrontSpec as_front = spec;
  as_front.backends = RoutedServers(models);
  as_front.active.clear();
  out += FrontSpecProblems(as_front);
  return out;
}

std::string RoutedModelListJson(const std::vector<RoutedModel>& models) {
  std::string out = R"({"object":"list","data":[)";
  std::set<std::string> listed;
  for (const RoutedModel& m : models) {
    if (!listed.insert(m.served_name).second) continue;
    if (listed.size() > 1) out += ",";
    out += R"({"id":")" + JsonText(m.served_name) + R"(","object":"model","owned_by":"berth"})";
  }
  return out + "]}";
}

Result<std::string> RenderRoutedFrontConfig(const FrontSpec& spec,
                                            const std::vector<RoutedModel>& models) {
  std::string problems = RoutedFrontProblems(spec, models);
  if (!problems.empty()) return Status::InvalidArgument(problems);
  std::string served;  // "`a`, `b`" for the error messages
  for (const RoutedModel& m : models)
    served += (served.empty() ? "`" : ", `") + JsonText(m.served_name) + "`";
  if (served.empty()) served = "no model";  // every service of the port stopped
  const std::string read = std::to_string(spec.buffer_bytes - 1024);
  std::ostringstream c;
  RenderGlobalAndDefaults(spec, c);
  RenderFrontendHead(spec, c);
  c << "  # Routed by the request body's model: the rules below run once the whole body is in,\n"
       "  # or once one buffer is full (tune.bufsize less about 1 KiB and the headers).\n";
  c << "  option http-buffer-request\n";
  c << "  # Every model this port serves, running or not (OpenAI's list, as vLLM answers it).\n";
  c << "  http-request return status 200 content-type application/json string '"
    << RoutedModelListJson(models) << "' if { path /v1/models }\n";
  c << "  # The body's model: a string, a number as its text; nothing when absent, null, a list\n"
       "  # or an object, or when the body is not JSON.\n";
  c << "  http-request set-var(txn.model) req.body,json_query('$.model')\n";
  c << "  http-request set-var(txn.body_len) req.body_len\n";
  c << "  acl has_model var(txn.model) -m found\n";
  c << "  # The body was longer than what was read (its model may lie past the buffer).\n";
  c << "  acl body_cut req.body_size,sub(txn.body_len) gt 0\n";
  c << "  # The served names, hex-encoded: no user's or client's text is read as configuration.\n";
  for (const RoutedModel& m : models)
    c << "  acl served_model var(txn.model),hex -m str " << Hex(m.served_name) << "\n";
  if (models.empty()) c << "  acl served_model always_false\n";
  c << "  http-request return status 413 content-type application/json string '"
    << OpenAiError("The request body is longer than the " + read +
                       " bytes the front reads before routing, and they hold no model: send "
                       "`model` before the messages, or raise the front\\u0027s buffer_bytes.",
                   R"("request_too_large")")
    << "' if !has_model body_cut\n";
  c << "  http-request return status 400 content-type application/json string '"
    << OpenAiError(
           "The request names no model: its JSON body has no string `model`. This "
           "port serves " +
               served + ".",
           "null")
    << "' if !has_model\n";
  c << "  http-request return status 404 content-type application/json lf-string '"
    << OpenAiError(
           "The model `%[var(txn.model),bytes(0,100),json(utf8s)]` does not exist. "
           "This port serves " +
               served + ".",
           R"("model_not_found")")
    << "' if !served_model\n";
  for (const RoutedModel& m : models)
    c << "  use_backend " << kRoutedBackendPrefix << m.server.name << " if { var(txn.model),hex "
      << "-m str " << Hex(m.served_name) << " }\n";
  c << "\n";
  for (const FrontBackend& s : RoutedServers(models)) {
    RenderHoldingBackend(spec, kRoutedBackendPrefix + s.name,
                         {{s.name, s.host + ":" + std::to_string(s.port), true},
                          {kFrontHoldServer, "unix@" + spec.hold_socket, false}},
                         c);
  }
  RenderReadyAndHold(spec, c);
  return c.str();
}

Result<std::string> RenderFrontUnit(const FrontSpec& spec, const std::string& config_path,
                                    const std::string& haproxy_path) {
  std::string problems = FrontSpecProblems(spec);
  if (!IsPlainPath(config_path))
    problems += "front config path '" + config_path + "' is not a plain absolute path\n";
  if (!IsPlainPath(haproxy_path))
    problems += "haproxy path '" + haproxy_path + "' is not a plain absolute path\n";
  if (!problems.empty()) return Status::InvalidArgument(problems);
  const std::string hx = QuoteExecArg(haproxy_path);
  const std::string cfg = QuoteExecArg(config_path);
  const std::string port = std::to_string(spec.port);
  std::ostringstream b;
  b << "[Unit]\n";
  b << "Description=berth front of port " << port << " (HAProxy)\n";
  b << "After=network-online.target\nWants=network-online.target\n\n";
  b << "[Service]\n";
  // -Ws: master-worker with sd_notify; the master is the main process.
  b << "Type=notify\n";
  // The sockets and the pid file live in /run/berth/front-PORT (removed when the unit stops).
  if (spec.admin_socket.rfind(FrontRuntimeDir(spec.port) + "/", 0) == 0)
    b << "RuntimeDirectory=berth/front-" << port << "\nRuntimeDirectoryMode=0750\n";
  b << "ExecStartPre=" << hx << " -c -q -f " << cfg << "\n";
  b << "ExecStart=" << hx << " -Ws -f " << cfg << " -p " << QuoteExecArg(spec.pid_file) << " -S "
    << QuoteExecArg(spec.master_socket + ",mode,600") << "\n";
  // As Debian's haproxy.service: check the new configuration, then SIGUSR2 to the master.
  b << "ExecReload=" << hx << " -Ws -c -q -f " << cfg << "\n";
  b << "ExecReload=/bin/kill -USR2 $MAINPID\n";
  b << "KillMode=mixed\n";
  b << "Restart=on-failure\nRestartSec=2\n";
  // 143: the master exits with 128+SIGTERM on a clean stop.
  b << "SuccessExitStatus=143\n";
  b << "TimeoutStopSec=" << (spec.drain_ms + 999) / 1000 + 30 << "s\n\n";
  b << "[Install]\nWantedBy=multi-user.target\n";
  const std::string body = b.str();
  return std::string(kUnitMarker) + ". Edits are drift: berth rewrites this file.\n" +
         kSpecHashKey + Sha256Hex(body) + "\n" + body;
}

}  // namespace berth
