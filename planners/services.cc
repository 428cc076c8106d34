// The service diff: unit files to write or remove, services to start, restart or stop.
#include <algorithm>
#include <optional>
#include <set>

#include "core/hash.h"
#include "core/hf_cache.h"
#include "core/unit_marker.h"
#include "core/units.h"
#include "planners/draft.h"
#include "planners/on_demand.h"
#include "planners/plan_index.h"
#include "planners/planner.h"
#include "planners/prewarm.h"
#include "planners/standby.h"
#include "planners/unit_render.h"

namespace berth {
namespace {

// The commit in a unit's snapshot path for `repo`, "" if none.
std::string PinnedCommit(const std::string& content, const std::string& store,
                         const std::string& repo) {
  std::string prefix = HfCachePaths(store, repo).SnapshotsDir() + "/";
  size_t at = content.find(prefix);
  if (at == std::string::npos) return "";
  std::string commit = content.substr(at + prefix.size(), 40);
  return IsCommit(commit) ? commit : "";
}

Transition Make(ActionKind kind, const std::string& unit, const std::string& address, Reason reason,
                std::string detail, const ServiceSpec* spec) {
  Transition t;
  t.kind = kind;
  t.unit = unit;
  t.address = address;
  t.reason = reason;
  t.detail = std::move(detail);
  t.spec = spec;
  return t;
}

// Who wrote a unit that is not this state's, in words.
std::string NotOurs(const Observed& o, const ObservedUnit& u) {
  if (!u.managed) return "berth did not write it";
  std::string ours = o.state.lineage.empty() ? "this state directory has none yet"
                                             : "this one's is " + o.state.lineage;
  if (!u.lineage.empty())
    return "another berth state directory wrote it (lineage " + u.lineage + "; " + ours + ")";
  return "it carries berth's marker but no lineage, and this state directory does not list it";
}

Problem ForeignUnit(const Observed& o, const ServiceSpec& s, const ObservedUnit& u,
                    const std::string& doing) {
  Problem p;
  p.resource = "unit " + u.name;
  p.message = "service/" + s.name + ": " + u.name + " exists at " + u.fragment_path + " and " +
              NotOurs(o, u) + "; berth will not " + doing +
              " it. Set adopt: true on the service to let berth take it over (" + s.loc.ToString() +
              "), or rename the service";
  return p;
}

// What a unit file's change means for the service running it.
struct UnitFileChange {
  /// What the unit runs (its ExecStart argv and environment), for the engine check of a start
  /// or restart: kept in the draft only for the services the plan starts (at 10,000 running
  /// services, the others' were 15 MB).
  std::optional<std::pair<std::string, UnitExec>> exec;
  bool written = false;          // the plan writes the unit file
  bool restart = false;          // a running instance must restart to see it
  bool model_only = false;       // the only restart-worthy change is the model snapshot path
  bool install_changed = false;  // the write changes [Install]: an enabled unit is re-enabled
  std::string detail;            // why it restarts
  /// The unit file's text once the plan's write (if any) is done; "" when berth cannot read it.
  std::string after;
  /// Its RestartDigest, computed when asked: most plans never need it, and a SHA-256 of every
  /// unit was a tenth of a plan of 10,000 services.
  std::string Digest() const { return after.empty() ? "" : RestartDigest(after); }
};

// What a write-unit's detail adds for a running service: whether the change reaches it by a
// daemon-reload alone, or which keys need its restart.
std::string Needs(const UnitDiff& diff) {
  if (!diff.needs_restart) return " (daemon-reload only, no restart)";
  std::string keys;
  for (const auto& k : diff.restart_keys) keys += (keys.empty() ? "" : ", ") + k;
  return " (restart: " + keys + ")";
}

// A service's unit as the manifest wants it, and what else of PlanUnitFile depends only on
// the manifest, the resolved models and the observation.
struct Rendering {
  std::string reported_name;  // what the gates ask /v1/models for
  Result<RenderedUnit> unit;
  bool drift = false;  // berth's unit file was edited by hand
  RenderContext ctx;   // what it was rendered with (an on-demand service's other units too)
};

Rendering Render(const Desired& d, const PlanIndex& index, const ServiceSpec& s,
                 const std::string& berth_version, const Draft& draft) {
  const Observed& o = index.observed();
  const ObservedUnit* u = index.Unit(s.UnitName());
  RenderContext ctx;
  ctx.store = StorePath(d, o);
  ctx.berth_version = berth_version;
  ctx.executable = ResolveExecutable(s, d.executables);
  ctx.berth_executable = draft.berth_executable;
  ctx.conflicts = SwapGroupConflicts(d, s);
  // The snapshot of model `key` the unit names; "" when it is not in the plan's models.
  auto snapshot = [&](const std::string& key) -> std::string {
    const ResolvedModel* m = key.empty() ? nullptr : FindResolved(draft.models, key);
    if (!m) return "";
    std::string commit = m->commit;
    // Unknown offline (nothing in the store, Hub not asked): keep the commit the unit pins.
    if (commit.empty() && u && index.Owns(*u))
      commit = PinnedCommit(u->content, ctx.store, m->spec->repo_id);
    return SnapshotPath(ctx.store, m->spec->repo_id, commit.empty() ? m->spec->revision : commit);
  };
  if (const ResolvedModel* m = s.model.empty() ? nullptr : FindResolved(draft.models, s.model)) {
    ctx.model_repo = m->spec->repo_id;
    ctx.snapshot_path = snapshot(s.model);
  }
  ctx.draft_snapshot_path = snapshot(s.draft_model);
  // What the gates ask /v1/models for: the adapter knows what its server reports.
  Rendering r{s.has_engine ? AdapterFor(s.engine).ReportedName(s, ctx) : "", TryRenderUnit(s, ctx),
              false, ctx};
  if (r.unit.ok() && u && u->HasFile() && index.Owns(*u) && !u->content.empty()) {
    // A body that is the one berth renders now hashes to its spec_hash (the no-op plan's
    // common case): no need to hash it again.
    std::string body = UnitBody(u->content);
    r.drift = body == UnitBody(r.unit->content) ? r.unit->spec_hash != u->spec_hash
                                                : Sha256Hex(body) != u->spec_hash;
  }
  return r;
}

// Decides the unit file of one service from its rendering.
UnitFileChange PlanUnitFile(const Desired& d, const PlanIndex& index, const ServiceSpec& s,
                            Rendering&& rendering, Draft* draft) {
  const Observed& o = index.observed();
  UnitFileChange change;
  const ObservedUnit* u = index.Unit(s.UnitName());
  if (s.has_engine) draft->reported_names[s.name] = std::move(rendering.reported_name);
  Result<RenderedUnit>& rendered = rendering.unit;
  if (!rendered.ok()) {
    // A value no unit file can hold: the plan is blocked, nothing is written.
    Problem p;
    p.resource = "unit " + s.UnitName();
    p.message = "service/" + s.name + " (" + s.loc.ToString() + "): " + rendered.status().message();
    draft->problems.push_back(p);
    return change;
  }
  RenderedUnit& want = *rendered;
  change.exec.emplace(
      want.name, UnitExec{std::move(want.argv), std::move(want.env), std::move(want.env_file)});

  Action w = MakeAction(ActionKind::kWriteUnit);
  w.address = "unit/" + want.name;
  w.unit = want.name;
  UnitFileStep& file = w.As<UnitFileStep>();
  file.content = want.content;
  bool has_file = u && u->HasFile();
  if (has_file) {
    file.replaces = true;
    file.old_content = WithoutLineage(u->content);
    file.old_note = u->content_note;
  }
  const bool active = u && u->IsActive();
  change.after = want.content;
  if (!has_file) {
    w.reason = Reason::kUnitMissing;
    w.detail = "new unit file in " + d.host.unit_dir;
  } else if (!index.Owns(*u)) {
    if (!s.adopt) {
      draft->problems.push_back(ForeignUnit(o, s, *u, "overwrite"));
      return change;
    }
    w.reason = Reason::kUnitAdopted;
    file.adopts = true;
    file.loses_edits = true;
    w.detail = "adopt: true replaces " + u->fragment_path + " (" + NotOurs(o, *u) +
               "); a copy of it is kept in the state directory (adopted/)";
    change.detail = "adopted unit now runs berth's configuration";
  } else {
    if (rendering.drift) {
      // Restored as berth wrote it; what the hand edit changed decides the restart, key by key.
      w.reason = Reason::kUnitDrift;
      file.loses_edits = true;
      UnitDiff diff = DiffUnits(u->content, want.content);
      w.detail = "edited by hand since berth wrote it" +
                 (diff.detail.empty() ? std::string() : ": " + diff.detail) + "; restoring" +
                 (active ? Needs(diff) : "");
      change.install_changed = diff.install_changed;
      change.detail = "unit restored after a hand edit";
      if (!diff.needs_restart) {
        draft->unit_writes.push_back(std::move(w));
        change.written = true;
        return change;
      }
    } else if (u->spec_hash != want.spec_hash) {
      w.reason = Reason::kUnitChanged;
      if (!u->content.empty()) {
        UnitDiff diff = DiffUnits(u->content, want.content);
        w.detail = diff.detail + (active ? Needs(diff) : "");
        change.install_changed = diff.install_changed;
        if (!diff.needs_restart) {
          draft->unit_writes.push_back(std::move(w));
          change.written = true;
          return change;
        }
        change.model_only = diff.only_model_path;
        change.detail = diff.detail;
      } else {
        w.detail = "spec hash " + u->spec_hash.substr(0, 12) + " → " + want.spec_hash.substr(0, 12);
        change.detail = "unit changed";
      }
    } else {
      change.after = u->content;
      return change;  // up to date
    }
  }
  draft->unit_writes.push_back(std::move(w));
  change.written = true;
  change.restart = has_file;
  return change;
}

Action BootAction(ActionKind kind, const std::string& unit, Reason reason, std::string detail) {
  Action a = MakeAction(kind);
  a.address = "unit/" + unit;
  a.unit = unit;
  a.reason = reason;
  a.detail = std::move(detail);
  return a;
}

// Whether the unit starts at boot, as the manifest wants it: an enable for a running service
// whose unit is disabled, a disable for one that should not run but is enabled. Only the states
// "enabled" and "disabled" are berth's to change; any other (static: no [Install] section;
// masked; generated, indirect, alias, linked, runtime links) is left alone, with a note when it
// decides what a reboot does against the manifest. `boot` is the unit file state once the
// plan's unit write (if any) is done; `fresh`: that write brings the [Install] section.
void PlanBoot(const ServiceSpec& s, const std::string& boot, bool fresh, Draft* draft) {
  std::string unit = s.UnitName();
  if (s.state == ServiceState::kRunning) {
    if (boot == "disabled") {
      draft->enables.push_back(BootAction(ActionKind::kEnable, unit, Reason::kNotEnabled,
                                          fresh ? "new unit file: a reboot starts it once enabled"
                                                : "disabled: a reboot would not start it"));
    } else if (boot != "enabled" && !boot.empty()) {
      std::string why = boot == "static" ? " (no [Install] section); it starts at boot only if "
                                           "another unit wants it"
                                         : "; a reboot may not start it";
      draft->notes.push_back(
          {"unit/" + unit, boot + ": berth does not change its boot state" + why});
    }
    return;
  }
  if (boot == "enabled") {
    bool absent = s.state == ServiceState::kAbsent;
    draft->disables.push_back(BootAction(ActionKind::kDisable, unit,
                                         absent ? Reason::kWantedAbsent : Reason::kWantedStopped,
                                         std::string(absent ? "state: absent" : "state: stopped") +
                                             "; enabled: a reboot would start it"));
  } else if (boot != "disabled" && boot != "static" && boot.rfind("masked", 0) != 0 &&
             boot != "enabled-runtime" && !boot.empty()) {
    draft->notes.push_back(
        {"unit/" + unit, boot + ": berth does not change its boot state; a reboot may start it"});
  }
}

// An enabled unit whose [Install] section changes: its links are made again (systemctl
// reenable: the disable removes the old WantedBy= links, the enable makes the new ones).
void Reenable(const std::string& unit, Draft* draft) {
  const std::string why = "[Install] changed: re-enabled so that its links follow the new ";
  draft->enables.push_back(BootAction(ActionKind::kDisable, unit, Reason::kUnitChanged,
                                      why + "section (first the old links go)"));
  draft->enables.push_back(BootAction(ActionKind::kEnable, unit, Reason::kUnitChanged,
                                      why + "section (then its own are made)"));
}

// The services wanted stopped that sleep (standby: sleep): each stays asleep while host memory
// holds it beside the margin a prewarm also leaves; below it, the biggest sleepers are stopped
// until what they give back brings memory over the margin.
void KeepOrEvictSleepers(const ObservedMemory& mem, std::vector<const ServiceSpec*> sleepers,
                         Draft* draft) {
  std::vector<std::pair<uint64_t, const ServiceSpec*>> by_size;
  for (const ServiceSpec* s : sleepers)
    by_size.emplace_back(StandbyWeights(*s, draft->models).value_or(0), s);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  const uint64_t margin = mem.known ? PrewarmMargin(mem.total_bytes) : 0;
  uint64_t available = mem.available_bytes;
  for (const auto& [weights, s] : by_size) {
    const std::string address = "service/" + s->name;
    const std::string held =
        weights ? FormatBytes(weights) + " of weights" : std::string("its weights");
    if (mem.known && available < margin) {
      draft->stops.push_back(
          Make(ActionKind::kStop, s->UnitName(), address, Reason::kStandbyEvicted,
               "state: stopped, asleep (standby: sleep), but host memory available (" +
                   FormatBytes(available) + ") is below the margin of " + FormatBytes(margin) +
                   ": stopped to give back the " + held +
                   " it keeps in host memory; a switch "
                   "back starts it cold",
               s));
      available += weights;
      continue;
    }
    draft->notes.push_back(
        {address, "asleep (standby: sleep): its " + held + " in host memory" +
                      (mem.known ? " (" + FormatBytes(available) + " available, margin " +
                                       FormatBytes(margin) + ")"
                                 : std::string()) +
                      "; a switch back wakes it in seconds"});
  }
}

}  // namespace

void DiffServices(const Desired& d, const PlanIndex& index, const std::string& berth_version,
                  Draft* draft) {
  const Observed& o = index.observed();
  std::vector<const ServiceSpec*> sleepers;  // wanted stopped, asleep (standby: sleep)
  for (const auto& [name, s] : d.services) {
    const ObservedUnit* u = index.Unit(s.UnitName());
    std::string address = "service/" + name;
    bool active = u && u->IsActive();
    if (u && u->need_daemon_reload) draft->reload_pending = true;
    if (u && index.Owns(*u) && !u->drop_in_paths.empty()) {
      // Drop-ins are someone else's files: berth leaves them, but says they change what runs.
      std::string paths;
      for (const auto& p : u->drop_in_paths) paths += (paths.empty() ? "" : ", ") + p;
      draft->warnings.push_back(u->name + " has drop-ins berth did not write (" + paths +
                                "): systemd runs the unit with them, not as the manifest says");
    }

    if (s.state == ServiceState::kAbsent) {
      if (s.on_demand) PlanOnDemandUnits(d, index, s, RenderContext{}, false, draft);
      if (active)
        draft->stops.push_back(Make(ActionKind::kStop, s.UnitName(), address, Reason::kWantedAbsent,
                                    "state: absent", &s));
      if (u && u->HasFile()) {
        if (!index.Owns(*u) && !s.adopt) {
          draft->problems.push_back(ForeignUnit(o, s, *u, "remove"));
          continue;
        }
        // Its [Install] symlinks go first: they would dangle once the file is gone.
        PlanBoot(s, u->unit_file_state, /*fresh=*/false, draft);
        Action r = MakeAction(ActionKind::kRemoveUnit);
        r.address = "unit/" + s.UnitName();
        r.unit = s.UnitName();
        r.reason = Reason::kWantedAbsent;
        r.detail = "state: absent; removes " + u->fragment_path;
        draft->unit_removals.push_back(std::move(r));
      }
      continue;
    }

    UnitFileChange change;
    size_t problems = draft->problems.size();
    if (s.has_engine) {
      Rendering rendering = Render(d, index, s, berth_version, *draft);
      RenderContext ctx = rendering.ctx;
      change = PlanUnitFile(d, index, s, std::move(rendering), draft);
      if (s.on_demand) {
        // Started by its first request, never by the plan, nor "repaired" when it idles.
        PlanOnDemandUnits(d, index, s, ctx, change.restart, draft);
        if (s.state == ServiceState::kStopped && active)
          draft->stops.push_back(Make(ActionKind::kStop, s.UnitName(), address,
                                      Reason::kWantedStopped, "state: stopped", &s));
        continue;
      }
    } else if (!u || u->load_state == "not-found") {
      if (s.state == ServiceState::kRunning) {
        Problem p;
        p.resource = "unit " + s.UnitName();
        p.message = "service/" + name + " (" + s.loc.ToString() + ") has no engine, so berth " +
                    "does not write its unit, and " + s.UnitName() +
                    " does not exist on this host: add an engine and model, or create the unit";
        draft->problems.push_back(p);
      }
      continue;
    }
    // What the running process was started from, as berth recorded it: the settings it runs
    // with (RestartDigest), or, recorded by an older berth, the spec hash of its unit file.
    const std::string* recorded = nullptr;
    if (u && index.Owns(*u) && s.has_engine && !u->invocation_id.empty()) {
      auto started = o.state.started.find(u->name);
      if (started != o.state.started.end() && started->second.first == u->invocation_id)
        recorded = &started->second.second;
    }
    const bool digest_recorded = recorded && recorded->starts_with("restart-keys:");
    // Its settings are the ones the unit file will hold: a daemon-reload is all it needs
    // (an apply killed after writing a reload-only change, before its daemon-reload).
    const bool runs_wanted =
        digest_recorded && !change.after.empty() && *recorded == change.Digest();
    if (u && u->need_daemon_reload && !change.restart && s.has_engine && !runs_wanted) {
      change.restart = true;
      change.model_only = false;
      change.detail = "its unit file changed on disk since systemd loaded it";
    }
    // Level-triggered resume: the process berth started still runs, but its unit file has
    // changed since (an apply killed between writing the unit and restarting the service).
    if (recorded && !change.restart && !runs_wanted &&
        (digest_recorded || *recorded != u->spec_hash)) {
      change.restart = true;
      change.model_only = false;
      change.detail = "its process started from an older unit file than the one on disk";
    }

    // Boot state: of this state's own units, of units the plan writes, and of the existing
    // units of state-only services; never of a unit the plan refuses to touch.
    if (draft->problems.size() == problems &&
        (change.written || (u && (!s.has_engine || index.Owns(*u))))) {
      std::string boot = u ? u->unit_file_state : "";
      // berth's unit files carry [Install] WantedBy=multi-user.target: a new one is disabled,
      // one replacing a file without [Install] (adopted) too; enabled stays enabled.
      bool fresh = change.written && (boot.empty() || boot == "static" || boot == "bad");
      PlanBoot(s, fresh ? "disabled" : boot, fresh, draft);
      if (change.install_changed && !fresh && boot == "enabled" &&
          s.state == ServiceState::kRunning)
        Reenable(s.UnitName(), draft);
    }

    if (s.state == ServiceState::kRunning) {
      // A crash loop (ObservedUnit::crash_looping) is the service's own failure, and systemd's
      // Restart= and StartLimitBurst= are the operator's policy for it: berth does not add
      // restarts of its own (each reloads the model), and counts the service as down. Once
      // systemd gave up, berth holds the start until the unit changes (a new manifest) or the
      // operator clears the failure (systemctl reset-failed).
      bool looping = u && u->crash_looping;
      std::string journal = looping ? "; journalctl -u " + u->name + " says why" : "";
      if (looping && u->GaveUp() && !change.written && !change.restart) {
        draft->warnings.push_back(
            address + " crash-looped: " + CrashLoopDetail(*u) +
            ". berth does not start it again on its own (each start reloads its model)" + journal +
            ". Fix the cause, then change the service in the manifest or run "
            "systemctl reset-failed " +
            u->name + ", and berth starts it again");
        continue;
      }
      if (looping && !u->GaveUp())
        draft->warnings.push_back(address + " is crash-looping: " + CrashLoopDetail(*u) +
                                  "; berth counts it as down and leaves its restarts to "
                                  "systemd (Restart=)" +
                                  journal);
      if (!active) {
        bool failed = u && u->active_state == "failed";
        std::string why = failed ? "failed; starting again" : "not running";
        if (!s.has_engine) {
          const StateOnlyWords& words = draft->state_only[name];
          why += " (" + words.known + ")";
          if (!words.unknown.empty()) draft->warnings.push_back(words.unknown);
        }
        draft->starts.push_back(Make(ActionKind::kStart, s.UnitName(), address,
                                     failed ? Reason::kFailed : Reason::kNotRunning, why, &s));
        if (change.exec) draft->execs.insert(std::move(*change.exec));
      } else if (change.restart) {
        if (change.exec) draft->execs.insert(std::move(*change.exec));
        draft->starts.push_back(Make(
            ActionKind::kRestart, s.UnitName(), address,
            change.model_only ? Reason::kModelUpdated : Reason::kConfigChanged, change.detail, &s));
      } else if (SleepsOnStandby(s) && o.Asleep(u->name)) {
        // standby: sleep, asleep: woken, its weights from host memory (a change of its unit
        // restarts it cold above).
        draft->starts.push_back(Make(ActionKind::kWake, s.UnitName(), address, Reason::kAsleep,
                                     "asleep (standby: sleep): woken, its weights still in host "
                                     "memory, not started cold",
                                     &s));
      } else {
        draft->notes.push_back(
            {address, looping ? "crash-looping, unit up to date" : "running, unit up to date"});
      }
    } else if (active && SleepsOnStandby(s) && o.Asleep(u->name)) {
      sleepers.push_back(&s);  // kept asleep, or stopped when memory cannot hold it (below)
    } else if (active) {
      draft->stops.push_back(Make(ActionKind::kStop, s.UnitName(), address, Reason::kWantedStopped,
                                  "state: stopped", &s));
    }
  }
  KeepOrEvictSleepers(o.memory, sleepers, draft);

  // Units berth wrote that the manifest no longer names.
  // The socket and proxy units of on-demand services, absent ones too: PlanOnDemandUnits
  // removes those (pruned here as well, each was removed twice).
  std::set<std::string> companions;
  for (const auto& [name, s] : d.services)
    if (s.on_demand)
      for (const std::string& unit : s.UnitNames()) companions.insert(unit);
  for (const ObservedUnit& u : o.units) {
    if (!u.managed || !u.HasFile() || companions.count(u.name)) continue;
    std::string service = u.name.substr(0, u.name.rfind(".service"));
    if (u.name.ends_with(".service") && d.services.count(service)) continue;
    if (!index.Owns(u)) {
      // Another state directory's unit (or one no state lists): not this state's to prune.
      draft->warnings.push_back(u.name + " carries berth's marker but is not this state's (" +
                                NotOurs(o, u) + "): left alone");
      continue;
    }
    std::string address = "service/" + service;
    if (u.IsActive())
      draft->stops.push_back(Make(ActionKind::kStop, u.name, address, Reason::kNotInManifest,
                                  "berth wrote it and no manifest names it any more", nullptr));
    if (u.unit_file_state == "enabled")
      draft->disables.push_back(BootAction(ActionKind::kDisable, u.name, Reason::kNotInManifest,
                                           "no manifest names it any more; enabled: a reboot "
                                           "would start it"));
    Action r = MakeAction(ActionKind::kRemoveUnit);
    r.address = "unit/" + u.name;
    r.unit = u.name;
    r.reason = Reason::kNotInManifest;
    r.detail = "berth wrote it and no manifest names it any more; removes " + u.fragment_path;
    draft->unit_removals.push_back(std::move(r));
  }
}

}  // namespace berth
