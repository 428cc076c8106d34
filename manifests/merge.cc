#include "manifests/merge.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "core/front.h"
#include "core/untrusted_text.h"
#include "manifests/did_you_mean.h"

namespace berth::manifests {
namespace {

void Add(std::vector<Diagnostic>* out, SourceLoc loc, std::string message, std::string hint = "") {
  out->push_back(Diagnostic{std::move(loc), std::move(message), std::move(hint)});
}

// Services that are meant to run on a port, in the order they were written.
std::vector<const ServiceDraft*> RunningOnPorts(const std::vector<ServiceDraft*>& services,
                                                const std::map<std::string, int>& file_index) {
  std::vector<const ServiceDraft*> out;
  for (const ServiceDraft* d : services) {
    if (d->spec.state == ServiceState::kRunning && d->spec.port) out.push_back(d);
  }
  auto key = [&](const ServiceDraft* d) {
    auto it = file_index.find(d->port_loc.file);
    return std::make_tuple(it == file_index.end() ? -1 : it->second, d->port_loc.line,
                           d->port_loc.column);
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const ServiceDraft* a, const ServiceDraft* b) { return key(a) < key(b); });
  return out;
}

// A deterministic backend port for a service behind a front: 20000-29999 by its name (FNV-1a),
// so that adding or removing another service does not move it (which would restart it).
int DerivedBackendPort(const std::string& name) {
  uint32_t h = 2166136261u;
  for (unsigned char c : name) h = (h ^ c) * 16777619u;
  return 20000 + static_cast<int>(h % 10000);
}

// The front of `front.port` as a service of its own: HAProxy in master-worker mode, its
// configuration in host.front_dir (written by the plan, reloaded through the master socket),
// its health the monitor URI every configuration berth renders answers.
ServiceSpec FrontService(const FrontDecl& front, const HostSpec& host,
                         const std::map<std::string, std::string>& executables) {
  ServiceSpec s;
  s.name = FrontServiceName(front.port);
  s.has_engine = true;
  s.engine = EngineKind::kCommand;
  s.is_front = true;
  auto exe = executables.find("haproxy");
  std::string base = host.front_dir + "/" + std::to_string(front.port);
  s.command = {exe == executables.end() ? "/usr/sbin/haproxy" : exe->second,
               "-W",
               "-f",
               base + ".cfg",
               "-S",
               base + ".master"};
  s.port = front.port;
  s.bind = front.bind;
  s.health.path = std::string(kFrontMonitorPath);
  s.health.timeout_ms = 60 * 1000;
  s.health.interval_ms = 1000;
  s.preflight = PreflightSpec{};
  s.preflight->engine_check = false;
  s.loc = front.loc;
  return s;
}

// `fronts:`: each front once, into desired->fronts; the services on a fronted port move to
// loopback backend ports (their public port becomes front_port): the backend port of each, by
// service name.
std::map<std::string, int> MergeFronts(const std::vector<FilePart>& parts,
                                       const std::vector<ServiceDraft*>& services, Desired* desired,
                                       std::vector<Diagnostic>* diagnostics) {
  for (const FilePart& part : parts)
    for (const FrontDecl& f : part.fronts) {
      auto [it, inserted] = desired->fronts.emplace(f.port, f);
      if (!inserted)
        Add(diagnostics, f.loc,
            "the front of port " + std::to_string(f.port) + " is defined twice, first at " +
                it->second.loc.ToString(),
            "keep each front in one file");
    }
  std::set<int> taken;  // public ports and backend ports given so far
  for (const ServiceDraft* d : services)
    if (d->spec.port) taken.insert(*d->spec.port);
  for (const auto& [port, f] : desired->fronts) taken.insert(port);
  std::vector<const ServiceDraft*> behind;
  for (const ServiceDraft* draft : services) {
    const ServiceDraft& d = *draft;
    const ServiceSpec& s = d.spec;
    if (s.name.rfind(kFrontServicePrefix, 0) == 0)
      Add(diagnostics, s.loc,
          "service name '" + s.name + "' begins with '" + std::string(kFrontServicePrefix) +
              "', which berth keeps for the services of its fronts",
          "rename the service");
    bool fronted = s.port && desired->fronts.count(*s.port);
    if (d.backend_port && !fronted) {
      Add(diagnostics, d.backend_port_loc,
          "'backend_port' applies only to a service behind a front, and port " +
              (s.port ? std::to_string(*s.port) : std::string("(none)")) + " has none",
          "add the port to fronts:, or remove backend_port");
      continue;
    }
    if (!fronted) continue;
    if (s.standby == Standby::kSleep && desired->fronts.at(*s.port).route_by_model) {
      Add(diagnostics, d.standby_loc,
          "service '" + s.name + "' has standby: sleep on port " + std::to_string(*s.port) +
              ", whose front routes by model: every service there serves at once, none is "
              "switched to, so none waits asleep",
          "remove standby, or route: model from the front (one service at a time, switched by "
          "berth)");
    }
    if (!s.has_engine && s.state == ServiceState::kRunning) {
      Add(diagnostics, d.port_loc,
          "service '" + s.name + "' runs on port " + std::to_string(*s.port) +
              ", which has a front, but berth does not write its unit (it has no engine), so it "
              "cannot move it to a backend port behind the front",
          "give the service an engine (berth then writes its unit), or set state: stopped");
      continue;
    }
    if (d.bind_loc.line != 0 && s.bind != "127.0.0.1" && s.bind != "::1" && s.bind != "localhost") {
      Add(diagnostics, d.bind_loc,
          "service '" + s.name + "' binds " + s.bind + ", but it is behind the front of port " +
              std::to_string(*s.port) + ", and its backend listens on loopback",
          "remove bind (the front's bind: says where the public port listens)");
      continue;
    }
    behind.push_back(&d);
  }
  // Explicit backend ports first, then derived ones in name order, each past the ports taken.
  std::map<std::string, int> backend;
  for (const ServiceDraft* d : behind) {
    if (!d->backend_port) continue;
    if (!taken.insert(*d->backend_port).second) {
      Add(diagnostics, d->backend_port_loc,
          "backend_port " + std::to_string(*d->backend_port) +
              " is already a public or backend port of this manifest",
          "choose another backend_port, or remove it to let berth choose");
      continue;
    }
    backend[d->spec.name] = *d->backend_port;
  }
  std::vector<const ServiceDraft*> derived;
  for (const ServiceDraft* d : behind)
    if (!d->backend_port) derived.push_back(d);
  std::sort(derived.begin(), derived.end(), [](const ServiceDraft* a, const ServiceDraft* b) {
    return a->spec.name < b->spec.name;
  });
  for (const ServiceDraft* d : derived) {
    int p = DerivedBackendPort(d->spec.name);
    while (taken.count(p)) p = p == 29999 ? 20000 : p + 1;
    taken.insert(p);
    backend[d->spec.name] = p;
  }
  return backend;
}

// On-demand services: each model server's own loopback port (`server_port:`, or derived from
// the name like a backend port, past every port of the manifest), by service name. Behind a
// front only where it routes by model (the socket then holds the backend port).
std::map<std::string, int> MergeOnDemand(const std::vector<ServiceDraft*>& services,
                                         const Desired& desired,
                                         const std::map<std::string, int>& backend,
                                         std::vector<Diagnostic>* diagnostics) {
  std::set<int> taken;
  for (const ServiceDraft* d : services)
    if (d->spec.port) taken.insert(*d->spec.port);
  for (const auto& [port, f] : desired.fronts) taken.insert(port);
  for (const auto& [name, port] : backend) taken.insert(port);
  std::map<std::string, int> server;
  std::vector<const ServiceDraft*> derived;
  for (const ServiceDraft* d : services) {
    const ServiceSpec& s = d->spec;
    if (s.name.rfind(kOnDemandPrefix, 0) == 0)
      Add(diagnostics, s.loc,
          "service name '" + s.name + "' begins with '" + std::string(kOnDemandPrefix) +
              "', which berth keeps for the units of on-demand services",
          "rename the service");
    if (!s.on_demand || !s.port) continue;
    if (auto f = desired.fronts.find(*s.port);
        f != desired.fronts.end() && !f->second.route_by_model) {
      Add(diagnostics, d->on_demand_loc,
          "service '" + s.name + "' is on demand on port " + std::to_string(*s.port) +
              ", whose front switches one service at a time: an on-demand service is woken by "
              "its requests, which that front never sends to a service it does not route to",
          "add route: model to the front of port " + std::to_string(*s.port) +
              " (every service there served at once, by the request's model), or remove "
              "on_demand");
      continue;
    }
    if (!d->server_port) {
      derived.push_back(d);
      continue;
    }
    if (!taken.insert(*d->server_port).second) {
      Add(diagnostics, d->server_port_loc,
          "server_port " + std::to_string(*d->server_port) + " is already a port of this manifest",
          "choose another server_port, or remove it to let berth choose");
      continue;
    }
    server[s.name] = *d->server_port;
  }
  std::sort(derived.begin(), derived.end(), [](const ServiceDraft* a, const ServiceDraft* b) {
    return a->spec.name < b->spec.name;
  });
  for (const ServiceDraft* d : derived) {
    int p = DerivedBackendPort(d->spec.name);
    while (taken.count(p)) p = p == 29999 ? 20000 : p + 1;
    taken.insert(p);
    server[d->spec.name] = p;
  }
  return server;
}

}  // namespace

Desired MergeParts(std::vector<FilePart> parts, std::vector<Diagnostic>* diagnostics) {
  Desired desired;
  std::map<std::string, int> file_index;
  // Every service kept, in file and source order: drafts in `parts`, whose specs move into
  // `desired` once checked (copies of 10,000 specs were a quarter of a load's memory).
  std::vector<ServiceDraft*> services;
  std::unordered_map<std::string_view, const ServiceDraft*> service_named;
  const FilePart* host_part = nullptr;
  const FilePart* fleet_part = nullptr;
  size_t service_count = 0;
  for (const FilePart& part : parts) service_count += part.services.size();
  services.reserve(service_count);
  for (FilePart& part : parts) {
    file_index.emplace(part.file, static_cast<int>(file_index.size()));
    if (part.has_host) {
      if (host_part != nullptr) {
        Add(diagnostics, part.host.loc,
            "host is defined twice, first at " + host_part->host.loc.ToString(),
            "keep host in one file");
      } else {
        host_part = &part;
        desired.host = part.host;
        desired.executables = part.executables;
      }
    }
    if (part.has_fleet) {
      if (fleet_part != nullptr) {
        Add(diagnostics, part.fleet.loc,
            "fleet is defined twice, first at " + fleet_part->fleet.loc.ToString(),
            "keep fleet in one file");
      } else {
        fleet_part = &part;
        desired.fleet = part.fleet;
      }
    }
    for (ModelSpec& model : part.models) {
      auto [it, inserted] = desired.models.emplace(model.name, model);
      if (!inserted) {
        Add(diagnostics, model.loc,
            "model '" + model.name + "' is defined twice, first at " + it->second.loc.ToString());
      }
    }
    for (ServiceDraft& draft : part.services) {
      auto [it, inserted] = service_named.emplace(draft.spec.name, &draft);
      if (!inserted) {
        Add(diagnostics, draft.spec.loc,
            "service '" + draft.spec.name + "' is defined twice, first at " +
                it->second->spec.loc.ToString());
        continue;
      }
      services.push_back(&draft);
    }
  }

  // Every model a service names must be defined in some file.
  std::vector<std::string_view> model_names;
  for (const auto& [name, model] : desired.models) model_names.push_back(name);
  for (const ServiceDraft* d : services) {
    if (d->spec.model.empty() || desired.models.count(d->spec.model) > 0) continue;
    Add(diagnostics, d->model_loc, "model '" + d->spec.model + "' is not defined in models",
        DidYouMean(d->spec.model, model_names));
  }
  for (const ServiceDraft* d : services) {
    const std::string& draft = d->spec.draft_model;
    if (draft.empty() || desired.models.count(draft) > 0) continue;
    Add(diagnostics, d->draft_model_loc, "draft model '" + draft + "' is not defined in models",
        DidYouMean(draft, model_names));
  }

  // Two running services cannot listen on one port (stopped and absent ones may share it: that
  // is how a switch-back stays ready), unless a front routes the port by model: then two cannot
  // serve one model name there.
  std::set<int> routed;
  for (const FilePart& part : parts)
    for (const FrontDecl& f : part.fronts)
      if (f.route_by_model) routed.insert(f.port);
  std::map<std::pair<int, std::string>, const ServiceDraft*> port_owner;
  for (const ServiceDraft* d : RunningOnPorts(services, file_index)) {
    const int port = *d->spec.port;
    const bool by_model = routed.count(port) > 0;
    const std::string served = by_model ? d->spec.ServedName() : "";
    if (std::string why = by_model ? ServedNameProblem(served) : ""; !why.empty()) {
      Add(diagnostics, d->port_loc,
          "service '" + d->spec.name + "' is served on port " + std::to_string(port) +
              ", whose front routes by model, as '" + Excerpt(served, 80) + "', which " + why,
          "set its engine's served_model_name or alias to a name of letters, digits and "
          "-._:/@+");
      continue;
    }
    auto [it, inserted] = port_owner.emplace(std::pair{port, served}, d);
    if (inserted) continue;
    const ServiceDraft& first = *it->second;
    if (by_model)
      Add(diagnostics, d->port_loc,
          "service '" + d->spec.name + "' serves model '" + served + "' on port " +
              std::to_string(port) + ", as does running service '" + first.spec.name + "' at " +
              first.port_loc.ToString() + "; the front of port " + std::to_string(port) +
              " routes each request by its model, so one of them would never be reached",
          "give one of them another served name (its engine's served_model_name or alias)");
    else
      Add(diagnostics, d->port_loc,
          "port " + std::to_string(port) + " is already used by running service '" +
              first.spec.name + "' at " + first.port_loc.ToString(),
          "give one of them another port, or set state: stopped on one");
  }
  std::map<std::string, int> backend = MergeFronts(parts, services, &desired, diagnostics);
  // A standby's server serves vLLM's dev-mode routes (/sleep, /wake_up and others that change
  // it): only loopback may reach them, or the front that holds its public port.
  for (const ServiceDraft* d : services) {
    const ServiceSpec& s = d->spec;
    // (Another engine's standby: sleep is refused where it is written.)
    if (s.standby != Standby::kSleep || s.engine != EngineKind::kVllm || backend.count(s.name))
      continue;
    if (s.bind.starts_with("127.") || s.bind == "::1" || s.bind == "[::1]" || s.bind == "localhost")
      continue;
    Add(diagnostics, d->standby_loc,
        "service '" + s.name + "' has standby: sleep, which serves vLLM's development routes " +
            "(VLLM_SERVER_DEV_MODE=1: /sleep, /wake_up and others that change the server) to " +
            "whoever reaches its port, and it binds " + s.bind,
        "set bind: 127.0.0.1, or put port " +
            (s.port ? std::to_string(*s.port) : std::string("?")) + " behind a front in fronts:");
  }
  std::map<std::string, int> server = MergeOnDemand(services, desired, backend, diagnostics);
  service_named.clear();  // its keys are the drafts' names, which move now
  for (ServiceDraft* d : services) {
    ServiceSpec& spec = d->spec;
    // Behind a front the service listens on its loopback backend port; the public port is the
    // front's, switched (front_port) or routed by model (routed_port).
    if (auto b = backend.find(spec.name); b != backend.end()) {
      (desired.fronts.at(*spec.port).route_by_model ? spec.routed_port : spec.front_port) =
          *spec.port;
      spec.port = b->second;
      spec.bind = "127.0.0.1";
    }
    if (auto od = server.find(spec.name); od != server.end()) {
      // The socket holds the port where the manifest binds it (behind a routed front: the
      // backend port); the server listens on loopback behind it.
      spec.on_demand->public_port = *spec.port;
      spec.on_demand->bind = spec.bind;
      spec.port = od->second;
      spec.bind = "127.0.0.1";
    } else {
      spec.on_demand.reset();  // refused above: planned as an ordinary service
    }
    std::string name = spec.name;
    desired.services.emplace(std::move(name), std::move(spec));
  }
  // Each front is a service of its own.
  for (const auto& [port, f] : desired.fronts) {
    ServiceSpec front = FrontService(f, desired.host, desired.executables);
    if (desired.services.count(front.name)) continue;  // reported above
    desired.services.emplace(front.name, std::move(front));
  }
  return desired;
}

}  // namespace berth::manifests
