#include "engine/cli/commands.h"

#include "engine/output/plan_output.h"
#include "manifests/loader.h"
#include "planners/planner.h"
#include "planners/unit_render.h"
#include "providers/saved/saved_observer.h"

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

}  // namespace berth
