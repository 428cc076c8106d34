#include "manifests/merge.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "manifests/did_you_mean.h"

namespace berth::manifests {
namespace {

void Add(std::vector<Diagnostic>* out, SourceLoc loc, std::string message, std::string hint = "") {
  out->push_back(Diagnostic{std::move(loc), std::move(message), std::move(hint)});
}

// Services that are meant to run on a port, in the order they were written.
std::vector<const ServiceDraft*> RunningOnPorts(const std::vector<ServiceDraft>& services,
                                                const std::map<std::string, int>& file_index) {
  std::vector<const ServiceDraft*> out;
  for (const ServiceDraft& d : services) {
    if (d.spec.state == ServiceState::kRunning && d.spec.port) out.push_back(&d);
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

}  // namespace

Desired MergeParts(std::vector<FilePart> parts, std::vector<Diagnostic>* diagnostics) {
  Desired desired;
  std::map<std::string, int> file_index;
  std::vector<ServiceDraft> services;  // every service kept, in file and source order
  const FilePart* host_part = nullptr;
  const FilePart* fleet_part = nullptr;
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
      auto [it, inserted] = desired.services.emplace(draft.spec.name, draft.spec);
      if (!inserted) {
        Add(diagnostics, draft.spec.loc,
            "service '" + draft.spec.name + "' is defined twice, first at " +
                it->second.loc.ToString());
        continue;
      }
      services.push_back(std::move(draft));
    }
  }

  // Every model a service names must be defined in some file.
  std::vector<std::string_view> model_names;
  for (const auto& [name, model] : desired.models) model_names.push_back(name);
  for (const ServiceDraft& d : services) {
    if (d.spec.model.empty() || desired.models.count(d.spec.model) > 0) continue;
    Add(diagnostics, d.model_loc, "model '" + d.spec.model + "' is not defined in models",
        DidYouMean(d.spec.model, model_names));
  }
  // vLLM's draft model is downloaded and named by its snapshot path like the service's own.
  for (const ServiceDraft& d : services) {
    const auto& sp = d.spec.vllm.speculative;
    if (d.spec.engine != EngineKind::kVllm || !sp || sp->model.empty() ||
        desired.models.count(sp->model) > 0)
      continue;
    Add(diagnostics, d.draft_model_loc,
        "vllm.speculative.model '" + sp->model + "' is not defined in models",
        DidYouMean(sp->model, model_names).empty()
            ? "define the draft model under models: and name its key here"
            : DidYouMean(sp->model, model_names));
  }

  // Two running services cannot listen on one port. Stopped and absent ones may share it: that
  // is how a switch-back stays ready.
  std::map<int, const ServiceDraft*> port_owner;
  for (const ServiceDraft* d : RunningOnPorts(services, file_index)) {
    auto [it, inserted] = port_owner.emplace(*d->spec.port, d);
    if (inserted) continue;
    const ServiceDraft& first = *it->second;
    Add(diagnostics, d->port_loc,
        "port " + std::to_string(*d->spec.port) + " is already used by running service '" +
            first.spec.name + "' at " + first.port_loc.ToString(),
        "give one of them another port, or set state: stopped on one");
  }
  return desired;
}

}  // namespace berth::manifests
