// berth lock: resolves each model's branch or tag on the Hub and records the commit in
// berth.lock, beside the manifests. plan, apply and the loop then use that commit until the next
// `berth lock --update`, a reviewed commit like any manifest change.
#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/hf_cache.h"
#include "core/lock_file.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/state/state.h"
#include "providers/hub/hub_api.h"

namespace berth {
namespace {

std::string Short(const std::string& commit) { return commit.substr(0, 7); }

bool Offline() {
  const char* v = std::getenv("HF_HUB_OFFLINE");
  std::string s = v ? v : "";
  return s == "1" || s == "ON" || s == "YES" || s == "TRUE" || s == "on" || s == "yes" ||
         s == "true";
}

}  // namespace

int RunLock(const LockCommand& cmd, std::ostream& out, std::ostream& err, Clock& clock) {
  Desired d;
  if (!LoadManifestOrExplain(cmd.manifest_path, &d, err)) return kExitError;
  for (const std::string& name : cmd.models) {
    if (d.models.count(name)) continue;
    std::string known;
    for (const auto& [n, m] : d.models) known += (known.empty() ? "" : ", ") + n;
    err << "berth lock: no model '" << name << "' in " << cmd.manifest_path
        << " (its models: " << (known.empty() ? "none" : known) << "); nothing was written\n";
    return kExitError;
  }
  auto named = [&](const std::string& name) {
    return cmd.models.empty() ||
           std::find(cmd.models.begin(), cmd.models.end(), name) != cmd.models.end();
  };

  std::map<std::string, LockEntry> next;
  std::vector<std::pair<std::string, const ModelSpec*>> to_resolve;
  for (const auto& [name, m] : d.models) {
    auto existing = d.locks.find(name);
    if (IsCommit(m.revision)) {
      if (existing != d.locks.end())
        out << "model/" << name << ": the manifest pins commit " << Short(m.revision)
            << " itself; entry removed\n";
      continue;
    }
    bool stale = existing != d.locks.end() && !d.PinFor(m);
    if (existing == d.locks.end() || stale || (cmd.update && named(name))) {
      to_resolve.emplace_back(name, &m);
    } else {
      next[name] = existing->second;
    }
  }
  for (const auto& [name, entry] : d.locks)
    if (!d.models.count(name))
      out << "model/" << name << ": no model of the manifest has this name any more; entry "
          << "removed\n";

  if (!to_resolve.empty() && Offline()) {
    err << "berth lock: HF_HUB_OFFLINE is set, so berth cannot ask the Hub which commit ";
    for (size_t i = 0; i < to_resolve.size(); ++i) err << (i ? ", " : "") << to_resolve[i].first;
    err << " points at; unset it and run berth lock again. Nothing was written\n";
    return kExitError;
  }
  HubHttp http(HubOptionsFromEnvironment());
  std::string now = NowRfc3339(clock);
  int failed = 0;
  for (const auto& [name, m] : to_resolve) {
    auto snap = ResolveSnapshot(http, m->repo_id, m->revision);
    auto existing = d.locks.find(name);
    if (!snap.ok()) {
      err << "berth lock: model/" << name << ": " << snap.status().message() << "\n";
      ++failed;
      continue;
    }
    const std::string where = m->repo_id + " " + m->revision;
    LockEntry e{m->repo_id, m->revision, snap->commit, now};
    if (existing == d.locks.end()) {
      out << "model/" << name << ": " << where << " pinned at " << Short(e.commit) << " (new)\n";
    } else if (!d.PinFor(*m)) {
      const LockEntry& old = existing->second;
      out << "model/" << name << ": " << where << " pinned at " << Short(e.commit)
          << " (the stale entry pinned " << old.repo_id << " " << old.revision << " at "
          << Short(old.commit) << ")\n";
    } else if (existing->second.commit == e.commit) {
      out << "model/" << name << ": " << where << " still at " << Short(e.commit)
          << ", unchanged\n";
      e.locked_at = existing->second.locked_at;
    } else {
      out << "model/" << name << ": " << where << " moved " << Short(existing->second.commit)
          << " → " << Short(e.commit) << "\n";
    }
    next[name] = e;
  }
  if (failed) {
    err << "berth lock: " << failed << " model" << (failed == 1 ? "" : "s")
        << " could not be resolved; " << d.lock_path << " was not written\n";
    return kExitError;
  }
  bool same = next.size() == d.locks.size() &&
              std::equal(next.begin(), next.end(), d.locks.begin(), [](auto& a, auto& b) {
                return a.first == b.first && a.second.repo_id == b.second.repo_id &&
                       a.second.revision == b.second.revision &&
                       a.second.commit == b.second.commit &&
                       a.second.locked_at == b.second.locked_at;
              });
  std::error_code ec;
  if (same && std::filesystem::exists(d.lock_path, ec)) {
    out << d.lock_path << " is up to date\n";
    return kExitOk;
  }
  Status s = WriteFileAtomically(d.lock_path, SerializeLockFile(next));
  if (!s.ok()) {
    err << "berth lock: cannot write " << d.lock_path << ": " << s.message()
        << "; the previous lock (if any) is unchanged\n";
    return kExitError;
  }
  out << "wrote " << d.lock_path << " (" << next.size() << " model" << (next.size() == 1 ? "" : "s")
      << " pinned); commit it with the manifests\n";
  return kExitOk;
}

}  // namespace berth
