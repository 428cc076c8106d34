#include "engine/cli/commands.h"

#include <unistd.h>

#include <iostream>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include "engine/apply/executor.h"
#include "engine/apply/live_host.h"
#include "engine/apply/run_once.h"
#include "engine/apply/saved_plan.h"
#include "engine/core/observed_json.h"
#include "engine/core/units.h"
#include "engine/loop/clock.h"
#include "engine/loop/manifest_probe.h"
#include "engine/loop/notifier.h"
#include "engine/loop/reconcile.h"
#include "engine/observe/live_observer.h"
#include "engine/output/plan_output.h"
#include "engine/output/progress.h"
#include "engine/state/state.h"
#include "manifests/loader.h"
#include "planners/planner.h"
#include "planners/unit_render.h"
#include "providers/health/health_probe.h"
#include "providers/hub/cache_layout.h"
#include "providers/hub/hub_api.h"
#include "providers/hub/pull.h"
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

Result<Observed> ObserveHost(const PlanCommand& cmd, const Desired& desired);

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
  if (cmd.observed_path.empty() && cmd.format == "text") {
    // The live host: the same pass as apply, without changing anything.
    RunOptions o;
    o.manifest_path = cmd.manifest_path;
    o.host = cmd.host;
    o.state_dir = cmd.state_dir;
    o.apply = false;
    o.out_path = cmd.out_path;
    RunReport r = RunOnce(o, out, err);
    if (r.exit_code == kExitChanges && !cmd.detailed_exitcode) return kExitOk;
    return r.exit_code;
  }
  Desired desired;
  if (!Load(cmd.manifest_path, &desired, err)) return kExitError;
  Result<Observed> observed = ObserveHost(cmd, desired);
  if (!observed.ok()) {
    err << "berth plan: " << observed.status().message() << "\n";
    return kExitError;
  }
  Plan plan = MakePlan(desired, *observed);
  out << (cmd.format == "json" ? PlanToJson(plan, desired) : PlanToText(plan, desired));
  if (!cmd.out_path.empty()) {
    // Made elsewhere (a CI job) from a saved observation: its berth_state and facts travel
    // with the plan, and the host checks them again before anything runs.
    SavedPlan s;
    s.plan = plan;
    s.manifest_path = cmd.manifest_path;
    s.manifest_digest = desired.digest;
    s.host = observed->hostname;
    s.state_lineage = observed->state.lineage;
    s.state_serial = observed->state.serial;
    s.created_unix = static_cast<int64_t>(std::time(nullptr));
    s.fingerprints = Fingerprint(plan, *observed);
    std::ofstream f(cmd.out_path, std::ios::trunc);
    f << SavedPlanToJson(s);
    if (!f) {
      err << "berth plan: cannot write " << cmd.out_path << "\n";
      return kExitError;
    }
  }
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

}  // namespace

namespace {

Result<Observed> ObserveHost(const PlanCommand& cmd, const Desired& desired) {
  if (!cmd.observed_path.empty()) return SavedObserver(cmd.observed_path).Observe(desired);
  LiveHost host;
  BERTH_RETURN_IF_ERROR(host.Connect(cmd.host, desired));
  auto state = StateDir(cmd.state_dir.empty() ? DefaultStateDir() : cmd.state_dir).Load();
  if (!state.ok()) return state.status();
  return host.Observe(desired, state->ToObserved());
}

}  // namespace

int RunObserve(const std::string& manifest_path, const std::string& format,
               const HostAccess& access, std::ostream& out, std::ostream& err) {
  Desired desired;
  if (!manifest_path.empty() && !Load(manifest_path, &desired, err)) return kExitError;
  LiveHost host;
  // Observing works without systemd (a GPU box without it, a container): units are then unknown.
  Status s = host.Connect(access, desired);
  if (!s.ok()) host.systemd_error = s.message();
  auto state = StateDir(access.state_dir.empty() ? DefaultStateDir() : access.state_dir).Load();
  if (!state.ok()) {
    err << "berth observe: " << state.status().message() << "\n";
    return kExitError;
  }
  auto o = host.Observe(desired, state->ToObserved());
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
  if (!o->units_known) out << "units: unknown\n";
  for (const auto& w : o->warnings) out << "warning: " << w << "\n";
  for (const auto& g : o->gpus) {
    out << "gpu " << g.index << " " << g.name << ": " << FormatGiB(g.memory_used) << " used of "
        << FormatGiB(g.memory_total) << "\n";
    for (const auto& p : g.processes)
      out << "  pid " << p.pid << " " << p.name << " " << FormatGiB(p.used_bytes)
          << (p.unit.empty() ? " (no unit)" : " (" + p.unit + ")") << "\n";
  }
  for (const auto& u : o->units)
    out << "unit " << u.name << ": " << u.load_state << " " << u.active_state << "/" << u.sub_state
        << (u.managed ? " (berth)" : "") << "\n";
  for (const auto& p : o->ports)
    out << "port " << p.port << " " << p.address << " pid " << p.pid << " " << p.process
        << (p.unit.empty() ? "" : " (" + p.unit + ")") << "\n";
  return kExitOk;
}

int RunApply(const ApplyCommand& cmd, std::istream& in, std::ostream& out, std::ostream& err) {
  RunOptions o;
  o.manifest_path = cmd.manifest_path;
  o.saved_plan_path = cmd.saved_plan;
  o.host = cmd.host;
  o.state_dir = cmd.state_dir;
  o.apply = true;
  o.yes = cmd.yes;
  o.confirm = &in;
  o.lock_timeout = std::chrono::seconds(cmd.lock_timeout_s);
  o.max_age_s = cmd.max_age_s;
  o.stop = cmd.stop;
  return RunOnce(o, out, err).exit_code;
}

int RunReconcile(const ReconcileCommand& cmd, std::ostream& out, std::ostream& err) {
  LoopOptions lo;
  lo.once = cmd.once;
  lo.plan_only = cmd.plan_only;
  lo.metrics_path = cmd.metrics_path;
  auto interval = ParseDurationMs(cmd.interval);
  if (!interval || *interval == 0) {
    err << "berth reconcile: --interval '" << cmd.interval << "' is not a duration like 5m\n";
    return kExitError;
  }
  lo.schedule.interval = std::chrono::milliseconds(*interval);
  std::string j = cmd.jitter;
  if (!j.empty() && j.back() == '%') {
    char* end = nullptr;
    double pct = std::strtod(j.c_str(), &end);
    if (end != j.c_str() + j.size() - 1 || pct < 0 || pct > 100) {
      err << "berth reconcile: --jitter '" << j << "' is not a percentage from 0% to 100%\n";
      return kExitError;
    }
    lo.schedule.jitter = pct / 100;
  } else if (auto d = ParseDurationMs(j)) {
    lo.schedule.jitter = std::min(1.0, static_cast<double>(*d) / static_cast<double>(*interval));
  } else {
    err << "berth reconcile: --jitter '" << j << "' is neither N% nor a duration\n";
    return kExitError;
  }

  RunOptions ro;
  ro.manifest_path = cmd.manifest_path;
  ro.host = cmd.host;
  ro.state_dir = cmd.state_dir;
  ro.apply = !cmd.plan_only;
  ro.yes = true;
  ro.lock_timeout = std::chrono::seconds(cmd.lock_timeout_s);
  ro.stop = cmd.stop;

  SystemLoopClock clock(cmd.wake_fd);
  SdNotifier notifier;
  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  LoopDeps deps;
  deps.pass = [&] {
    if (cmd.once) return RunOnce(ro, out, err);
    // In the loop a converged pass says only its status line, not the whole plan each time.
    std::ostringstream pass_out;
    RunReport r = RunOnce(ro, pass_out, err);
    if (r.outcome != Outcome::kNoChanges) out << pass_out.str() << std::flush;
    return r;
  };
  deps.manifest_fingerprint = [&] { return ManifestFingerprint(cmd.manifest_path); };
  deps.clock = &clock;
  deps.notifier = &notifier;
  deps.uniform01 = [&] { return uniform(rng); };
  deps.stop = cmd.stop;
  deps.reload = cmd.reload;
  deps.log = &err;
  return RunLoop(lo, deps);
}

namespace {

// hf://org/name[@revision] -> repo id and revision.
bool ParseSource(const std::string& source, std::string* repo, std::string* revision,
                 std::ostream& err) {
  const std::string prefix = "hf://";
  std::string rest = source.rfind(prefix, 0) == 0 ? source.substr(prefix.size()) : "";
  size_t at = rest.find('@');
  *repo = rest.substr(0, at);
  *revision = at == std::string::npos ? "main" : rest.substr(at + 1);
  size_t slash = repo->find('/');
  if (repo->empty() || slash == std::string::npos || slash == 0 || slash + 1 == repo->size() ||
      repo->find('/', slash + 1) != std::string::npos || revision->empty()) {
    err << "'" << source
        << "' is not a model source: write hf://org/name or hf://org/name@revision\n";
    return false;
  }
  return true;
}

}  // namespace

int RunPull(const PullCommand& cmd, std::ostream& out, std::ostream& err) {
  PullRequest req;
  if (!ParseSource(cmd.source, &req.repo_id, &req.revision, err)) return kExitError;
  req.store = cmd.store.empty() ? DefaultStorePath() : cmd.store;
  req.include = cmd.include;
  req.exclude = cmd.exclude;
  HubOptions hub = HubOptionsFromEnvironment();
  if (cmd.connections > 0) hub.connections = cmd.connections;
  ProgressPrinter printer(out, ::isatty(1) == 1);
  hub.on_progress = [&printer](const PullProgress& p) { printer.Update(p); };
  auto r = PullModel(req, hub);
  if (!r.ok()) {
    err << "berth pull: " << r.status().message() << "\n";
    return kExitError;
  }
  PullProgress p;
  p.repo_id = req.repo_id;
  p.bytes_done = p.bytes_total = r->bytes_total;
  p.bytes_fetched = r->stats.bytes_fetched;
  p.files_done = p.files_total = static_cast<int>(r->files.size());
  p.seconds = r->seconds;
  printer.Done(p);
  out << req.repo_id << "@" << r->snapshot.commit << " in " << req.store << ": " << r->files.size()
      << " files, " << FormatBytes(r->bytes_total) << " (" << FormatBytes(r->stats.bytes_fetched)
      << " fetched, " << FormatBytes(r->stats.bytes_resumed) << " resumed, "
      << FormatBytes(r->stats.bytes_reused) << " already there), verified\n";
  return kExitOk;
}

int RunVerify(const std::string& source, const std::string& store_arg, std::ostream& out,
              std::ostream& err) {
  std::string repo, revision;
  if (!ParseSource(source, &repo, &revision, err)) return kExitError;
  std::string store = store_arg.empty() ? DefaultStorePath() : store_arg;
  CacheLayout layout(store, repo);
  std::string commit = revision;
  if (commit.size() != 40) {
    std::ifstream ref(layout.repo_dir() + "/refs/" + revision);
    std::getline(ref, commit);
  }
  RepoSnapshot listing;
  listing.repo_id = repo;
  listing.commit = commit;
  std::vector<HubFileEntry> wanted;
  std::ifstream rec(layout.RecordPath(commit));
  if (rec) {
    try {
      auto j = nlohmann::json::parse(rec);
      for (const auto& f : j.at("files")) {
        HubFileEntry e;
        e.path = f.at("path").get<std::string>();
        e.size = f.at("size").get<uint64_t>();
        std::string blob = f.at("blob").get<std::string>();
        (blob.size() == 64 ? e.lfs_sha256 : e.git_oid) = blob;
        wanted.push_back(e);
      }
    } catch (const std::exception& ex) {
      err << "berth verify: " << layout.RecordPath(commit) << " is damaged (" << ex.what()
          << "); verifying against the Hub instead\n";
      wanted.clear();
    }
  }
  if (wanted.empty()) {
    HubHttp http(HubOptionsFromEnvironment());
    auto snap = ResolveSnapshot(http, repo, commit.empty() ? revision : commit);
    if (!snap.ok()) {
      err << "berth verify: no record of " << repo << "@" << revision << " in " << store
          << " and the Hub could not be asked: " << snap.status().message() << "\n";
      return kExitError;
    }
    listing = *snap;
    commit = snap->commit;
    wanted = snap->files;
  }
  auto report = VerifySnapshot(store, listing, wanted);
  if (!report.ok()) {
    err << "berth verify: " << report.status().message() << "\n";
    return kExitError;
  }
  for (const auto& f : report->corrupt) out << "corrupt  " << f << "\n";
  for (const auto& f : report->missing) out << "missing  " << f << "\n";
  for (const auto& f : report->extra) out << "extra    " << f << "\n";
  out << repo << "@" << commit.substr(0, 7) << ": " << report->ok.size() << " files verified, "
      << report->corrupt.size() << " corrupt, " << report->missing.size() << " missing, "
      << report->extra.size() << " extra\n";
  bool bad = !report->corrupt.empty() || !report->missing.empty();
  if (bad) out << "run berth pull " << source << " to fetch what is missing or corrupt\n";
  return bad ? kExitError : kExitOk;
}

int RunVerifyManifest(const std::string& manifest_path, const std::string& model,
                      const std::string& store_arg, std::ostream& out, std::ostream& err) {
  Desired desired;
  if (!Load(manifest_path, &desired, err)) return kExitError;
  if (!model.empty() && !desired.models.count(model)) {
    err << "berth verify: no model '" << model << "' in " << manifest_path << "\n";
    return kExitError;
  }
  std::string store = !store_arg.empty()            ? store_arg
                      : !desired.host.store.empty() ? desired.host.store
                                                    : DefaultStorePath();
  int rc = kExitOk;
  for (const auto& [name, m] : desired.models) {
    if (!model.empty() && name != model) continue;
    out << "model/" << name << ": ";
    if (RunVerify("hf://" + m.repo_id + "@" + m.revision, store, out, err) != kExitOk)
      rc = kExitError;
  }
  return rc;
}

}  // namespace berth
