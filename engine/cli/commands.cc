#include "engine/cli/commands.h"

#include <iostream>

#include "engine/apply/executor.h"
#include "engine/core/observed_json.h"
#include "engine/core/units.h"
#include "engine/observe/live_observer.h"
#include "engine/output/plan_output.h"
#include "manifests/loader.h"
#include "planners/planner.h"
#include "planners/unit_render.h"
#include "providers/health/health_probe.h"
#include "providers/saved/saved_observer.h"
#include "providers/systemd/journal.h"
#include "providers/systemd/sdbus_manager.h"
#include "providers/systemd/unit_files.h"

namespace berth {
namespace {

bool Load(const std::string& path, Desired* desired, std::ostream& err) {
  LoadResult r = LoadManifests(path);
  if (!r.ok()) {
    for (const auto& d : r.diagnostics) err << d.ToString() << "\n";
    err << r.diagnostics.size() << " problem" << (r.diagnostics.size() == 1 ? "" : "s") << " in "
        << path << "; nothing was planned or changed\n";
    return false;
  }
  *desired = std::move(r.desired);
  return true;
}

Result<Observed> ObserveHost(const std::string& observed_path, const Desired& desired) {
  if (observed_path.empty())
    return Status::FailedPrecondition(
        "live observation of this host is not available in this build; plan against a saved "
        "observation with --observed FILE (made by `berth observe -o json` on the host)");
  return SavedObserver(observed_path).Observe(desired);
}

}  // namespace

int RunValidate(const std::string& manifest_path, std::ostream& out, std::ostream& err) {
  Desired desired;
  if (!Load(manifest_path, &desired, err)) return kExitError;
  out << manifest_path << ": valid (" << desired.models.size() << " model"
      << (desired.models.size() == 1 ? "" : "s") << ", " << desired.services.size() << " service"
      << (desired.services.size() == 1 ? "" : "s") << ")\n";
  return kExitOk;
}

int RunPlan(const PlanCommand& cmd, std::ostream& out, std::ostream& err) {
  if (cmd.format != "text" && cmd.format != "json") {
    err << "berth plan: unknown output format '" << cmd.format << "' (use text or json)\n";
    return kExitError;
  }
  Desired desired;
  if (!Load(cmd.manifest_path, &desired, err)) return kExitError;
  Result<Observed> observed = ObserveHost(cmd.observed_path, desired);
  if (!observed.ok()) {
    err << "berth plan: " << observed.status().message() << "\n";
    return kExitError;
  }
  Plan plan = MakePlan(desired, *observed);
  out << (cmd.format == "json" ? PlanToJson(plan, desired) : PlanToText(plan, desired));
  if (plan.blocked()) return kExitBlocked;
  if (cmd.detailed_exitcode && !plan.empty()) return kExitChanges;
  return kExitOk;
}

int RunRender(const std::string& manifest_path, const std::string& observed_path,
              const std::string& service, std::ostream& out, std::ostream& err) {
  Desired desired;
  if (!Load(manifest_path, &desired, err)) return kExitError;
  if (!service.empty() && !desired.services.count(service)) {
    err << "berth render: no service '" << service << "' in " << manifest_path << "\n";
    return kExitError;
  }
  Observed observed;
  if (!observed_path.empty()) {
    Result<Observed> r = SavedObserver(observed_path).Observe(desired);
    if (!r.ok()) {
      err << "berth render: " << r.status().message() << "\n";
      return kExitError;
    }
    observed = std::move(r).value();
  }
  // The plan renders every unit with the commits it resolved; show exactly those.
  Plan plan = MakePlan(desired, observed);
  bool any = false;
  for (const auto& [name, s] : desired.services) {
    if (!service.empty() && name != service) continue;
    if (!s.has_engine || s.state == ServiceState::kAbsent) continue;
    RenderContext ctx;
    ctx.store = StorePath(desired, observed);
    ctx.executable = ResolveExecutable(s, desired.executables);
    ctx.berth_version = BERTH_VERSION;
    if (!s.model.empty()) {
      const ModelSpec& m = desired.models.at(s.model);
      std::string commit = m.revision;
      if (const HubInfo* h = observed.FindHub(m.repo_id, m.revision)) commit = h->commit;
      for (const auto& a : plan.actions)
        if (a.kind == ActionKind::kDownload && a.repo_id == m.repo_id && !a.commit.empty())
          commit = a.commit;
      ctx.model_repo = m.repo_id;
      ctx.snapshot_path = SnapshotPath(ctx.store, m.repo_id, commit);
    }
    RenderedUnit u = RenderUnit(s, ctx);
    out << "# " << desired.host.unit_dir << "/" << u.name << "\n" << u.content << "\n";
    any = true;
  }
  if (!any) err << "berth render: no service with an engine to render\n";
  return any ? kExitOk : kExitError;
}

namespace {

// The live host's providers, connected once per command.
struct LiveHost {
  std::unique_ptr<SdJournalReader> journal;
  std::unique_ptr<SystemdManager> systemd;
  std::unique_ptr<UnitFileStore> unit_files;

  Status Connect(const HostAccess& access, const Desired& desired) {
    journal = std::make_unique<SdJournalReader>(access.journal_dir);
    SdBusOptions opts;
    opts.address = access.bus_address;
    opts.journal = journal.get();
    auto mgr = ConnectSystemd(opts);
    if (!mgr.ok()) return mgr.status();
    systemd = std::move(mgr).value();
    unit_files = std::make_unique<UnitFileStore>(desired.host.unit_dir);
    return Status::Ok();
  }
  Result<Observed> Observe(const Desired& desired) {
    return LiveObserver({systemd.get(), unit_files.get(), "/proc"}).Observe(desired);
  }
};

}  // namespace

int RunObserve(const std::string& manifest_path, const std::string& format,
               const HostAccess& access, std::ostream& out, std::ostream& err) {
  Desired desired;
  if (!manifest_path.empty() && !Load(manifest_path, &desired, err)) return kExitError;
  LiveHost host;
  Status s = host.Connect(access, desired);
  if (!s.ok()) {
    err << "berth observe: " << s.message() << "\n";
    return kExitError;
  }
  auto o = host.Observe(desired);
  if (!o.ok()) {
    err << "berth observe: " << o.status().message() << "\n";
    return kExitError;
  }
  if (format == "json") {
    out << ObservedToJson(*o);
    return kExitOk;
  }
  out << "host " << o->hostname << " at " << o->observed_at << "\n";
  out << "store " << o->store.path << (o->store.exists ? "" : " (missing)") << ": "
      << FormatBytes(o->store.free_bytes) << " free of " << FormatBytes(o->store.total_bytes)
      << "\n";
  for (const auto& r : o->store.repos)
    for (const auto& v : r.revisions)
      out << "  model " << r.repo_id << "@" << v.commit.substr(0, 7) << " "
          << FormatBytes(v.bytes_present) << (v.complete ? " complete" : " partial") << "\n";
  if (!o->gpus_known) out << "gpus: unknown (" << o->gpu_error << ")\n";
  for (const auto& g : o->gpus)
    out << "gpu " << g.index << " " << g.name << ": " << FormatGiB(g.memory_used) << " used of "
        << FormatGiB(g.memory_total) << "\n";
  for (const auto& u : o->units)
    out << "unit " << u.name << ": " << u.load_state << " " << u.active_state << "/" << u.sub_state
        << (u.managed ? " (berth)" : "") << "\n";
  for (const auto& p : o->ports)
    out << "port " << p.port << " " << p.address << " pid " << p.pid << " " << p.process
        << (p.unit.empty() ? "" : " (" + p.unit + ")") << "\n";
  return kExitOk;
}

int RunApply(const ApplyCommand& cmd, std::istream& in, std::ostream& out, std::ostream& err) {
  Desired desired;
  if (!Load(cmd.manifest_path, &desired, err)) return kExitError;
  LiveHost host;
  Status s = host.Connect(cmd.host, desired);
  if (!s.ok()) {
    err << "berth apply: " << s.message() << "\n";
    return kExitError;
  }
  auto observed = host.Observe(desired);
  if (!observed.ok()) {
    err << "berth apply: " << observed.status().message() << "; nothing was changed\n";
    return kExitError;
  }
  Plan plan = MakePlan(desired, *observed);
  out << PlanToText(plan, desired);
  if (plan.blocked()) return kExitBlocked;
  if (plan.empty()) return kExitOk;
  if (!cmd.yes) {
    out << "\nApply these " << plan.actions.size()
        << " actions? Only 'yes' is accepted: " << std::flush;
    std::string answer;
    std::getline(in, answer);
    if (answer != "yes") {
      err << "berth apply: not confirmed; nothing was changed\n";
      return kExitError;
    }
  }
  CurlHealthProbe health;
  ExecutorDeps deps;
  deps.systemd = host.systemd.get();
  deps.unit_files = host.unit_files.get();
  deps.health = &health;
  deps.journal = host.journal.get();
  deps.progress = &out;
  ExecResult r = Executor(deps).Run(plan);
  if (!r.status.ok()) {
    err << "berth apply: " << r.status.message() << "\n"
        << r.steps_done << " of " << plan.actions.size()
        << " steps were done; run berth plan to see what is left\n";
    return kExitFailed;
  }
  auto after = host.Observe(desired);
  if (!after.ok()) {
    err << "berth apply: applied, but observing the host again failed: " << after.status().message()
        << "\n";
    return kExitError;
  }
  Plan left = MakePlan(desired, *after);
  if (!left.empty()) {
    err << "berth apply: applied, but the host has not converged; what is left:\n"
        << PlanToText(left, desired);
    return kExitError;
  }
  out << "applied " << plan.actions.size() << " actions; the host matches the manifests\n";
  return kExitOk;
}

}  // namespace berth
