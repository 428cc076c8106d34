#include "planners/on_demand.h"

#include <algorithm>

#include "core/units.h"
#include "planners/dark_windows.h"

namespace berth {

std::string OnDemandHealthUrl(const ServiceSpec& s) {
  return std::string("http://")
             .append(s.DialHost())
             .append(":")
             .append(std::to_string(s.port.value_or(0))) +
         s.health.path;
}

std::string ListenAddress(const std::string& bind, int port) {
  std::string host = bind;
  if (host.size() > 1 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return host + ":" + std::to_string(port);
}

std::vector<std::string> SwapGroupConflicts(const Desired& d, const ServiceSpec& s) {
  std::vector<std::string> out;
  if (!s.on_demand || s.on_demand->swap_group.empty()) return out;
  for (const auto& [name, other] : d.services)
    if (name != s.name && other.on_demand && other.state != ServiceState::kAbsent &&
        other.on_demand->swap_group == s.on_demand->swap_group)
      out.push_back(other.UnitName());
  return out;
}

std::string FirstRequestWait(const ServiceSpec& s, const std::vector<uint64_t>& start_times_ms,
                             std::optional<uint64_t> unrecorded) {
  std::vector<uint64_t> times = start_times_ms;
  if (unrecorded) times.push_back(*unrecorded);
  if (times.size() > BerthState::kStartTimesKept)
    times.erase(times.begin(), times.end() - BerthState::kStartTimesKept);
  if (times.empty())
    return "no start recorded yet (at most its health timeout, " +
           FormatDurationMs(s.health.timeout_ms) + ")";
  const std::string about = "about " + FormatDurationMs(MedianMs(times));
  const size_t n = times.size();
  if (!unrecorded)
    return about + " (the median of " + std::to_string(n) + " start" + (n == 1 ? "" : "s") +
           " berth recorded)";
  if (n == 1) return about + " (its last start, which systemd timed)";
  return about + " (the median of " + std::to_string(n) + " starts: " + std::to_string(n - 1) +
         " berth recorded and the last, which systemd timed)";
}

}  // namespace berth

#include "core/hash.h"
#include "core/unit_marker.h"
#include "planners/host_ledger.h"

namespace berth {
namespace {

Action UnitAction(ActionKind kind, const std::string& unit, Reason reason, std::string detail) {
  Action a = MakeAction(kind);
  a.address = "unit/" + unit;
  a.unit = unit;
  a.reason = reason;
  a.detail = std::move(detail);
  return a;
}

// Writes `want` when the file is missing or not what berth renders; true when the plan writes
// it (or cannot, a problem: a unit of the same name that is not this state's).
bool PlanFile(const Desired& d, const PlanIndex& index, const ServiceSpec& s,
              Result<RenderedUnit>&& rendered, Draft* draft) {
  if (!rendered.ok()) {
    draft->problems.push_back(Problem{
        std::nullopt, "unit " + s.UnitName(),
        "service/" + s.name + " (" + s.loc.ToString() + "): " + rendered.status().message()});
    return false;
  }
  RenderedUnit& want = *rendered;
  const ObservedUnit* u = index.Unit(want.name);
  Action w =
      UnitAction(ActionKind::kWriteUnit, want.name, Reason::kUnitMissing,
                 "new unit file in " + d.host.unit_dir + " (on demand: service/" + s.name + ")");
  UnitFileStep& file = w.As<UnitFileStep>();
  file.content = want.content;
  if (u && u->HasFile()) {
    if (!index.Owns(*u)) {
      draft->problems.push_back(
          Problem{std::nullopt, "unit " + want.name,
                  "service/" + s.name + ": " + want.name + " exists at " + u->fragment_path +
                      " and berth did not write it for this state; berth will not overwrite it"});
      return false;
    }
    const bool drift = Sha256Hex(UnitBody(u->content)) != u->spec_hash;
    if (!drift && u->spec_hash == want.spec_hash) return false;
    file.replaces = true;
    file.old_content = WithoutLineage(u->content);
    w.reason = drift ? Reason::kUnitDrift : Reason::kUnitChanged;
    file.loses_edits = drift;
    w.detail = drift ? "edited by hand since berth wrote it; restoring"
                     : DiffUnits(u->content, want.content).detail;
  }
  draft->unit_writes.push_back(std::move(w));
  return true;
}

}  // namespace

void PlanOnDemandUnits(const Desired& d, const PlanIndex& index, const ServiceSpec& s,
                       const RenderContext& ctx, bool server_restart, Draft* draft) {
  const OnDemandSpec& od = *s.on_demand;
  const std::string socket = OnDemandSocketName(s.name);
  const std::string proxy = OnDemandProxyName(s.name);
  const ObservedUnit* sock = index.Unit(socket);
  const ObservedUnit* server = index.Unit(s.UnitName());
  const bool sock_active = sock && sock->IsActive();
  // Behind a routed front the socket's port is the front's backend for the model.
  const std::string port = std::to_string(od.public_port) +
                           (s.routed_port ? " (" + s.ServedName() + " behind the front of port " +
                                                std::to_string(s.routed_port) + ")"
                                          : std::string());

  if (s.state == ServiceState::kAbsent) {
    if (sock_active)
      draft->socket_stops.push_back(UnitAction(ActionKind::kStop, socket, Reason::kWantedAbsent,
                                               "state: absent; port " + port + " closes"));
    for (const std::string& unit : {socket, proxy}) {
      const ObservedUnit* u = index.Unit(unit);
      if (!u || !u->HasFile() || !index.Owns(*u)) continue;
      if (u->unit_file_state == "enabled")
        draft->disables.push_back(
            UnitAction(ActionKind::kDisable, unit, Reason::kWantedAbsent, "state: absent"));
      draft->unit_removals.push_back(UnitAction(ActionKind::kRemoveUnit, unit,
                                                Reason::kWantedAbsent,
                                                "state: absent; removes " + u->fragment_path));
    }
    return;
  }
  bool socket_written = PlanFile(d, index, s, RenderOnDemandSocket(s, ctx), draft);
  PlanFile(d, index, s, RenderOnDemandProxy(s, ctx), draft);
  if (server && server->unit_file_state == "enabled")
    draft->disables.push_back(
        UnitAction(ActionKind::kDisable, s.UnitName(), Reason::kUnitChanged,
                   "on demand: its first request starts it, not a reboot (the socket does)"));

  const std::string address = "service/" + s.name;
  if (s.state == ServiceState::kStopped) {
    if (sock_active)
      draft->socket_stops.push_back(UnitAction(ActionKind::kStop, socket, Reason::kWantedStopped,
                                               "state: stopped; port " + port + " closes"));
    if (sock && sock->unit_file_state == "enabled")
      draft->disables.push_back(UnitAction(ActionKind::kDisable, socket, Reason::kWantedStopped,
                                           "state: stopped; enabled: a reboot would open it"));
    return;  // the server's stop, when it runs, is DiffServices' ordinary stop
  }

  // state: running is the socket listening (and enabled for boot).
  if (!sock_active)
    draft->socket_starts.push_back(UnitAction(
        ActionKind::kStart, socket, Reason::kNotRunning,
        "on demand: listens on port " + port + "; the first request starts " + s.UnitName()));
  else if (socket_written)
    draft->socket_starts.push_back(
        UnitAction(ActionKind::kRestart, socket, Reason::kConfigChanged,
                   "its unit changed (port " + port + " is closed for the moment of the restart)"));
  std::string boot = sock ? sock->unit_file_state : "";
  if (boot != "enabled")
    draft->enables.push_back(UnitAction(ActionKind::kEnable, socket, Reason::kNotEnabled,
                                        "a reboot opens port " + port + " again"));

  const BerthState& records = index.observed().state;
  auto times = records.start_times_ms.find(s.UnitName());
  const std::string wait = FirstRequestWait(
      s, times == records.start_times_ms.end() ? std::vector<uint64_t>{} : times->second,
      server ? records.UnrecordedStart(*server) : std::nullopt);
  const std::string idle =
      "stops after " + FormatDurationMs(od.idle_stop_ms) + " without a connection" +
      (od.swap_group.empty()
           ? std::string()
           : " or when another member of swap group " + od.swap_group + " starts");
  const std::string state = server ? server->active_state : "";
  if (server && server->IsActive() && server_restart) {
    Transition t;
    t.kind = ActionKind::kStop;
    t.unit = s.UnitName();
    t.address = address;
    t.reason = Reason::kConfigChanged;
    t.detail = "on demand, its unit changed: stopped, and the next request starts the new one";
    t.spec = &s;
    draft->stops.push_back(std::move(t));
  } else if (state == "activating") {
    draft->notes.push_back(
        {address, "starting (woken by a request on port " + port + "); " + idle, "on demand"});
  } else if (server && server->IsActive()) {
    draft->notes.push_back(
        {address, "running (woken by a request on port " + port + "); " + idle, "on demand"});
  } else {
    std::string failed = state == "failed"
                             ? "its last start failed (journalctl -u " + s.UnitName() +
                                   " says why); the next request tries again. "
                             : "";
    draft->notes.push_back({address,
                            failed + "idle: port " + port +
                                " is held by its socket; a first request waits " + wait + "; " +
                                idle,
                            "on demand"});
  }
}

std::vector<Problem> OnDemandGpuProblems(const Desired& d, const HostLedger& ledger) {
  std::vector<Problem> out;
  if (!ledger.gpus_known()) return out;
  for (int gpu : ledger.Gpus()) {
    uint64_t always = 0;
    std::map<std::string, std::pair<uint64_t, std::string>> groups;  // group -> largest, who
    bool any = false;
    for (const auto& [name, s] : d.services) {
      if (s.state != ServiceState::kRunning ||
          std::find(s.gpus.begin(), s.gpus.end(), gpu) == s.gpus.end())
        continue;
      uint64_t claim = ledger.Claim(s, gpu);
      if (!s.on_demand) {
        always += claim;
        continue;
      }
      any = true;
      std::string group = s.on_demand->swap_group.empty() ? "service " + name
                                                          : "swap group " + s.on_demand->swap_group;
      auto& [largest, who] = groups[group];
      if (claim > largest || who.empty()) {
        largest = claim;
        who = name;
      }
    }
    if (!any) continue;
    uint64_t need = always;
    std::string parts;
    for (const auto& [group, largest] : groups) {
      need += largest.first;
      parts += (parts.empty() ? "" : ", ") + group + " " + FormatBytes(largest.first) +
               (group.rfind("swap", 0) == 0 ? " (" + largest.second + ", its largest)" : "");
    }
    if (need <= ledger.Total(gpu)) continue;
    Problem p;
    p.resource = "gpu " + std::to_string(gpu);
    p.message = "GPU " + std::to_string(gpu) +
                ": every on-demand service may be woken at once, and then they need " +
                FormatBytes(need) + " (" + parts +
                (always ? ", beside " + FormatBytes(always) + " of services that always run" : "") +
                "), more than its " + FormatBytes(ledger.Total(gpu)) +
                ": put them in one swap_group, or lower their claims";
    p.needed = need;
    p.available = ledger.Total(gpu);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace berth
