#include "planners/fronts.h"

#include "core/units.h"
#include "planners/front_render.h"

namespace berth {
namespace {

std::string Base(const HostSpec& host, int port) {
  return host.front_dir + "/" + std::to_string(port);
}

std::string Address(int port) { return "front/" + std::to_string(port); }

// Sets the fields every front action carries.
Action FrontAction(ActionKind kind, const HostSpec& host, const FrontSpec& spec) {
  Action a = MakeAction(kind, Address(spec.port), Reason::kUnitChanged);
  a.unit = FrontServiceName(spec.port) + ".service";
  FrontStep& f = a.As<FrontStep>();
  f.port = spec.port;
  f.socket = spec.admin_socket;
  f.master = spec.master_socket;
  f.config = FrontConfigPath(host, spec.port);
  return a;
}

}  // namespace

std::string FrontConfigPath(const HostSpec& host, int port) { return Base(host, port) + ".cfg"; }
std::string FrontSocketPath(const HostSpec& host, int port) { return Base(host, port) + ".sock"; }

FrontSpec FrontOf(const Desired& d, int port, const std::string& active) {
  FrontSpec f;
  f.port = port;
  auto decl = d.fronts.find(port);
  if (decl != d.fronts.end()) {
    f.bind = decl->second.bind;
    f.hold_ms = decl->second.hold_ms;
    f.drain_ms = decl->second.drain_ms;
    f.retry_after_s = (decl->second.retry_after_ms + 999) / 1000;
    f.ready_path = decl->second.ready_path;
    f.ready = true;
  }
  f.routed = decl != d.fronts.end() && decl->second.route_by_model;
  if (f.routed) {
    // Every running service is served by its model's name (on demand: its socket's port).
    for (const auto& [name, s] : d.services)
      if (s.routed_port == port && s.port && s.state == ServiceState::kRunning)
        f.models.push_back({s.ServedName(),
                            {name, "127.0.0.1", s.on_demand ? s.on_demand->public_port : *s.port}});
  } else {
    // Absent services have no unit, so no server; a stopped one keeps its server (a switch
    // back to it needs no reload).
    for (const auto& [name, s] : d.services)
      if (s.front_port == port && s.port && s.state != ServiceState::kAbsent)
        f.backends.push_back({name, "127.0.0.1", *s.port});
    f.active = active;
  }
  std::string base = Base(d.host, port);
  f.admin_socket = FrontSocketPath(d.host, port);
  f.master_socket = base + ".master";
  f.pid_file = base + ".pid";
  f.hold_socket = base + ".hold";
  return f;
}

std::string FrontProblem(const FrontSpec& spec) {
  Result<std::string> r = RenderHaproxyConfig(spec);
  return r.ok() ? "" : r.status().message();
}

std::string FrontConfigText(const FrontSpec& spec) {
  Result<std::string> r = RenderHaproxyConfig(spec);
  std::string body = r.ok() ? *r : "# berth could not render this front: " + r.status().message();
  for (char& c : body)
    if (c == '\r' || c == '\0') c = '?';
  return std::string(kActiveLine) + spec.active + "\n" + body;
}

std::string ActiveNow(const Desired& d, const Observed& o, int port) {
  auto file = o.front_configs.find(port);
  if (file == o.front_configs.end()) return std::string(kHoldServer);
  const std::string& text = file->second;
  if (text.rfind(kActiveLine, 0) != 0) return std::string(kHoldServer);
  size_t end = text.find('\n');
  std::string name = text.substr(
      kActiveLine.size(), end == std::string::npos ? std::string::npos : end - kActiveLine.size());
  auto s = d.services.find(name);
  if (s == d.services.end() || s->second.front_port != port) return std::string(kHoldServer);
  const ObservedUnit* u = o.FindUnit(s->second.UnitName());
  if (!u || !u->IsUp()) return std::string(kHoldServer);
  return name;
}

std::string ActiveWanted(const Desired& d, int port) {
  for (const auto& [name, s] : d.services)
    if (s.front_port == port && s.state == ServiceState::kRunning) return name;
  return std::string(kHoldServer);
}

std::string FrontHaproxy(const Desired& d, int port) {
  auto s = d.services.find(FrontServiceName(port));
  if (s != d.services.end() && !s->second.command.empty()) return s->second.command[0];
  auto exe = d.executables.find("haproxy");
  return exe == d.executables.end() ? "/usr/sbin/haproxy" : exe->second;
}

Action WriteFrontAction(const Desired& d, const FrontSpec& spec, const std::string& why,
                        bool reload) {
  Action a = FrontAction(ActionKind::kWriteFront, d.host, spec);
  a.reason = Reason::kUnitChanged;
  a.As<FrontStep>().config_text = FrontConfigText(spec);
  a.As<FrontStep>().haproxy = FrontHaproxy(d, spec.port);
  a.As<FrontStep>().reload = reload;
  std::string served;
  for (const RoutedModel& m : spec.models) served += (served.empty() ? "" : ", ") + m.served_name;
  a.detail =
      why +
      (!spec.routed     ? "; routes to " + spec.active
       : served.empty() ? std::string("; serves no model (none of the port's services runs)")
                        : "; serves " + served + " by the request's model") +
      (reload ? "; reloaded seamlessly (the port stays open, requests in flight finish)" : "");
  return a;
}

Action RouteAction(const HostSpec& host, const FrontSpec& spec, const std::string& server,
                   const std::string& why) {
  Action a = FrontAction(ActionKind::kRoute, host, spec);
  a.reason = Reason::kHealthGate;
  a.As<FrontStep>().server = server;
  if (server == kHoldServer)
    a.detail = "hold new requests on port " + std::to_string(spec.port) + " (they wait, up to " +
               FormatDurationMs(spec.hold_ms) + ", then 503 with Retry-After; never refused)" +
               (why.empty() ? "" : ": " + why);
  else
    a.detail = "send new requests on port " + std::to_string(spec.port) + " to " + server +
               (why.empty() ? "" : ": " + why);
  return a;
}

Action DrainAction(const HostSpec& host, const FrontSpec& spec, const FrontDecl& decl,
                   const std::string& server) {
  Action a = FrontAction(ActionKind::kDrain, host, spec);
  a.address = "service/" + server;
  a.reason = Reason::kFreesResources;
  a.As<FrontStep>().server = server;
  a.As<FrontStep>().timeout_ms = decl.drain_ms;
  a.detail = "its requests in flight on port " + std::to_string(spec.port) +
             " (streams too) finish before it stops, at most " + FormatDurationMs(decl.drain_ms);
  return a;
}

Action ReadyAction(const HostSpec& host, const FrontSpec& spec, const FrontDecl& decl, bool ready) {
  Action a = FrontAction(ActionKind::kReady, host, spec);
  a.reason = Reason::kHealthGate;
  a.As<FrontStep>().ready = ready;
  a.As<FrontStep>().timeout_ms = ready ? 0 : decl.ready_lead_ms;
  a.detail = ready ? decl.ready_path + " answers 200 again: this host takes traffic"
                   : decl.ready_path + " answers 503, then berth waits " +
                         FormatDurationMs(decl.ready_lead_ms) +
                         " so the outside load balancer moves traffic away first";
  return a;
}

}  // namespace berth
