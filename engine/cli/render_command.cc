#include <iterator>

#include "core/hf_cache.h"
#include "core/units.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/cli/live_host.h"
#include "planners/planner.h"
#include "planners/unit_render.h"
#include "providers/saved/saved_observer.h"

namespace berth {

int RunRender(const std::string& manifest_path, const std::string& observed_path,
              const std::string& service, std::ostream& out, std::ostream& err) {
  Desired desired;
  if (!LoadManifestOrExplain(manifest_path, &desired, err)) return kExitError;
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
  } else {
    // This host, as plan sees it: the store's refs and the Hub resolve each revision to the
    // commit the unit will name. Nothing is changed; what cannot be observed is only a warning.
    // Only the models of the units rendered are asked about, and none that the manifest or
    // berth.lock pins: the unit names that commit whatever the Hub says.
    Desired asked = desired;
    for (auto it = asked.models.begin(); it != asked.models.end();) {
      const ModelSpec& m = it->second;
      bool rendered = false;
      for (const auto& [name, s] : desired.services)
        for (const std::string& key : s.ModelKeys())
          rendered = rendered || ((service.empty() || name == service) && key == it->first);
      bool pinned = IsCommit(m.revision) || desired.PinFor(m);
      it = rendered && !pinned ? std::next(it) : asked.models.erase(it);
    }
    LiveHost live{HostAccess{}};
    Result<HostSeams> seams = live.Connect(asked);
    Result<Observed> r = seams.ok() ? seams->observer->Observe(asked) : seams.status();
    if (r.ok())
      observed = std::move(r).value();
    else
      err << "berth render: could not observe this host (" << r.status().message()
          << "); revisions are not resolved to commits\n";
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
    // The snapshot of model `key` as the plan resolved it.
    auto snapshot = [&](const std::string& key) {
      const ModelSpec& m = desired.models.at(key);
      std::string commit = m.revision;
      if (const HubInfo* h = observed.FindHub(m.repo_id, m.revision)) commit = h->commit;
      if (const LockEntry* pin = desired.PinFor(m)) commit = pin->commit;
      for (const auto& a : plan.actions)
        if (a.kind == ActionKind::kDownload && a.As<DownloadStep>().repo_id == m.repo_id &&
            !a.As<DownloadStep>().commit.empty())
          commit = a.As<DownloadStep>().commit;
      if (const ObservedRepo* repo = observed.FindRepo(m.repo_id); repo && !IsCommit(commit))
        for (const auto& rev : repo->revisions)
          for (const auto& ref : rev.refs)
            if (ref == m.revision) commit = rev.commit;
      if (!IsCommit(commit))
        err << "berth render: model/" << key << ": revision '" << m.revision
            << "' is not resolved to a commit here (not in the store, not in berth.lock, the Hub "
               "not asked); the unit berth writes names the commit apply resolves, shown here as '"
            << m.revision << "'\n";
      return SnapshotPath(ctx.store, m.repo_id, commit);
    };
    if (!s.model.empty()) {
      ctx.model_repo = desired.models.at(s.model).repo_id;
      ctx.snapshot_path = snapshot(s.model);
    }
    if (!s.draft_model.empty()) ctx.draft_snapshot_path = snapshot(s.draft_model);
    Result<RenderedUnit> rendered = TryRenderUnit(s, ctx);
    if (!rendered.ok()) {
      err << "berth render: service/" << name << ": " << rendered.status().message() << "\n";
      return kExitError;
    }
    const RenderedUnit& u = *rendered;
    out << "# " << desired.host.unit_dir << "/" << u.name << "\n" << u.content << "\n";
    any = true;
  }
  if (!any) err << "berth render: no service with an engine to render\n";
  return any ? kExitOk : kExitError;
}
}  // namespace berth
