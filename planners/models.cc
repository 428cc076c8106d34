// The model diff: which revisions to download, which to remove, what to keep.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/hf_cache.h"
#include "core/units.h"
#include "planners/draft.h"
#include "planners/plan_index.h"
#include "planners/planner.h"

namespace berth {
namespace {

bool IsSafetensors(const std::string& path) {
  constexpr std::string_view kExt = ".safetensors";
  return path.size() > kExt.size() &&
         path.compare(path.size() - kExt.size(), kExt.size(), kExt) == 0;
}

std::string Short(const std::string& commit) { return commit.substr(0, 7); }

const ObservedRevision* FindRevision(const ObservedRepo* repo, const std::string& commit) {
  if (repo)
    for (const auto& rev : repo->revisions)
      if (rev.commit == commit) return &rev;
  return nullptr;
}

ResolvedModel Resolve(const Desired& d, const ModelSpec& m, const PlanIndex& index) {
  ResolvedModel r;
  r.spec = &m;
  const ObservedRepo* repo = index.Repo(m.repo_id);
  const HubInfo* hub = index.Hub(m.repo_id, m.revision);
  if (hub) r.upstream = hub->commit;
  if (IsCommit(m.revision)) {
    r.commit = m.revision;
    r.commit_source = CommitSource::kManifest;
  } else if (const LockEntry* pin = d.PinFor(m)) {
    r.commit = pin->commit;
    r.commit_source = CommitSource::kLock;
  } else if (hub && !hub->commit.empty()) {
    r.commit = hub->commit;
    r.commit_source = CommitSource::kHub;
  } else if (repo) {
    for (const auto& rev : repo->revisions)
      if (std::find(rev.refs.begin(), rev.refs.end(), m.revision) != rev.refs.end()) {
        r.commit = rev.commit;
        r.commit_source = CommitSource::kStoreRef;
      }
  }
  if (!r.commit.empty()) r.present = FindRevision(repo, r.commit);
  // The Hub's listing of the wanted commit: the revision's, or (pinned behind upstream) the
  // commit's own.
  const HubInfo* listing = nullptr;
  if (hub && (hub->commit == r.commit || r.commit.empty())) {
    listing = hub;
  } else if (const HubInfo* at = r.commit.empty() ? nullptr : index.Hub(m.repo_id, r.commit);
             at && at->commit == r.commit) {
    listing = at;
  }
  if (r.present && r.present->complete && r.present->weights_bytes) {
    r.weights_bytes = r.present->weights_bytes;
    r.weights_source = "in the store";
  } else if (listing) {
    uint64_t weights = 0;
    bool any = false;
    for (const auto& f : listing->files)
      if (IsSafetensors(f.path) && FileWanted(f.path, m.include, m.exclude)) {
        weights += f.size;
        any = true;
      }
    if (any) {
      r.weights_bytes = weights;
      r.weights_source = "on the Hub";
    }
  }
  if (listing) {
    uint64_t total = 0;
    for (const auto& f : listing->files)
      if (FileWanted(f.path, m.include, m.exclude)) total += f.size;
    r.total_bytes = total;
    r.size_source = SizeSource::kHub;
  } else if (r.present && r.present->bytes_total) {
    r.total_bytes = *r.present->bytes_total;
    r.size_source = SizeSource::kStore;
  } else if (m.size_hint) {
    r.total_bytes = *m.size_hint;
    r.size_source = SizeSource::kManifest;
  }
  return r;
}

Action Removal(const ResolvedModel& m, const ObservedRevision& rev, Reason reason,
               const std::string& why) {
  Action a = MakeAction(ActionKind::kRemoveModel, "model/" + m.spec->name, reason);
  a.As<RemoveModelStep>() = {m.spec->repo_id, rev.commit};
  a.frees.disk_bytes = rev.bytes_present;
  a.detail = m.spec->repo_id + "@" + Short(rev.commit) + ", up to " +
             FormatBytes(rev.bytes_present) + " (blobs shared with kept revisions stay): " + why;
  return a;
}

// The pin's notes and warnings: upstream moved past the pin, a stale entry, no entry at all.
void PinNotes(const Desired& d, const ResolvedModel& r, Draft* draft) {
  const ModelSpec& m = *r.spec;
  if (IsCommit(m.revision)) return;  // the manifest pins it itself
  std::string address = "model/" + m.name;
  if (const LockEntry* pin = d.PinFor(m)) {
    if (!r.upstream.empty() && r.upstream != pin->commit)
      draft->notes.push_back({address, "upstream " + m.revision + " moved to " + Short(r.upstream) +
                                           " (pinned at " + Short(pin->commit) +
                                           "); berth lock --update " + m.name + " to move"});
    return;
  }
  auto entry = d.locks.find(m.name);
  if (entry != d.locks.end()) {
    const LockEntry& e = entry->second;
    draft->warnings.push_back(
        address + ": berth.lock's entry is stale: it pins " + e.repo_id + "@" + e.revision +
        " at " + Short(e.commit) + " but the manifest asks for " + m.repo_id + "@" + m.revision +
        " (" + m.loc.ToString() + "); the plan follows the manifest. Run berth lock --update " +
        m.name + " to pin it again");
    return;
  }
  draft->warnings.push_back(address + " is not pinned: revision '" + m.revision +
                            "' follows the Hub, so an upstream push changes this host at the next "
                            "pass. Run berth lock to pin it in berth.lock");
}

// What makes the wanted commit differ from the complete one(s) in the store, in words.
std::string WhyAnotherCommit(const ResolvedModel& r, const ObservedRepo* repo,
                             const std::string& previous) {
  const ModelSpec& m = *r.spec;
  std::string has = previous.empty() ? "" : " (the store has " + Short(previous) + ")";
  switch (r.commit_source) {
    case CommitSource::kLock:
      return "berth.lock pins " + m.revision + " at " + Short(r.commit) + has;
    case CommitSource::kManifest:
      return "the manifest asks for commit " + Short(r.commit) + has;
    case CommitSource::kHub:
      if (repo)
        for (const auto& rev : repo->revisions)
          if (rev.commit != r.commit &&
              std::find(rev.refs.begin(), rev.refs.end(), m.revision) != rev.refs.end())
            return "upstream " + m.revision + " moved to " + Short(r.commit) + " (the store's " +
                   m.revision + " is " + Short(rev.commit) + "; not pinned in berth.lock)";
      return "the manifest asks for revision '" + m.revision + "'" + has;
    case CommitSource::kStoreRef:
    case CommitSource::kUnknown:
      break;
  }
  return "the store's " + m.revision + " points at a commit that is not complete" + has;
}

// The complete revision the model most recently had: the last complete one berth downloaded,
// else any complete one.
std::string PreviousCommit(const Observed& o, const ObservedRepo* repo, const std::string& want) {
  std::string previous;
  auto it = o.state.models.find(repo->repo_id);
  if (it != o.state.models.end())
    for (const std::string& c : it->second)
      if (const ObservedRevision* rev = FindRevision(repo, c); rev && rev->complete && c != want)
        previous = c;
  if (previous.empty())
    for (const auto& rev : repo->revisions)
      if (rev.complete && rev.commit != want) previous = rev.commit;
  return previous;
}

}  // namespace

const ResolvedModel* FindResolved(const std::vector<ResolvedModel>& models,
                                  const std::string& name) {
  auto it = std::lower_bound(
      models.begin(), models.end(), name,
      [](const ResolvedModel& m, const std::string& n) { return m.spec->name < n; });
  return it != models.end() && it->spec->name == name ? &*it : nullptr;
}

void DiffModels(const Desired& d, const PlanIndex& index, Draft* draft) {
  const Observed& o = index.observed();
  // The models a service wanted running serves.
  std::unordered_set<std::string> served;
  for (const auto& [sname, s] : d.services)
    if (s.state == ServiceState::kRunning)
      for (const std::string& key : s.ModelKeys()) served.insert(key);
  // In name order (d.models is a map): FindResolved relies on it.
  draft->models.reserve(d.models.size());
  for (const auto& [name, m] : d.models) {
    ResolvedModel r = Resolve(d, m, index);
    r.used = served.count(name) > 0;
    draft->models.push_back(std::move(r));
  }
  // repo_id -> the models of the manifest naming it (draft->models no longer grows).
  std::unordered_map<std::string, std::vector<const ResolvedModel*>> of_repo;
  for (const ResolvedModel& r : draft->models) of_repo[r.spec->repo_id].push_back(&r);
  for (const ResolvedModel& r : draft->models) {
    const ModelSpec& m = *r.spec;
    std::string address = "model/" + m.name;
    const ObservedRepo* repo = index.Repo(m.repo_id);
    bool wanted_on_disk = m.keep || r.used;
    std::string size_text;
    if (r.total_bytes) size_text = FormatBytes(*r.total_bytes);
    PinNotes(d, r, draft);

    if (r.present && r.present->complete) {
      if (wanted_on_disk) {
        std::string detail = m.repo_id + "@" + Short(r.commit) +
                             (size_text.empty() ? "" : ", " + size_text) + ", complete";
        detail += r.used ? ", in use" : (m.keep ? ", kept (keep: true)" : "");
        draft->notes.push_back({address, detail});
      }
    } else if (wanted_on_disk) {
      Action a = MakeAction(ActionKind::kDownload, address, Reason::kModelMissing);
      // The executor fetches the commit (when known) whatever the branch says by then, and
      // points the store's ref of the revision at it.
      a.As<DownloadStep>() = {m.repo_id, m.revision, r.commit, m.include, m.exclude};
      uint64_t present = r.present ? r.present->bytes_present : 0;
      std::string previous = repo ? PreviousCommit(o, repo, r.commit) : "";
      std::string why = ": not in the store";
      if (r.present) {
        a.reason = Reason::kModelPartial;
        why = ": partial in the store, resuming";
      } else if (!previous.empty()) {
        a.reason = Reason::kRevisionChanged;
        why = ": " + WhyAnotherCommit(r, repo, previous);
      }
      std::string what = m.repo_id + "@" + (r.commit.empty() ? m.revision : Short(r.commit));
      if (!r.commit.empty() && r.commit != m.revision)
        what += " (" + m.revision +
                (r.commit_source == CommitSource::kLock ? ", pinned in berth.lock" : "") + ")";
      if (r.total_bytes) {
        uint64_t need = *r.total_bytes > present ? *r.total_bytes - present : 0;
        a.requires_.disk_bytes = need;
        what += ", " + FormatBytes(need);
        if (present) what += " more (" + FormatBytes(present) + " of " + size_text + " present)";
        if (r.size_source == SizeSource::kManifest)
          what += " (size from the manifest's size:, the Hub was not asked)";
      } else {
        what += ", size unknown";
        draft->warnings.push_back("disk check for " + address +
                                  " could not be made: its size is unknown (the Hub was not "
                                  "asked and the manifest gives no size:)");
      }
      if (r.commit.empty())
        draft->warnings.push_back(address + ": revision '" + m.revision +
                                  "' is resolved to a commit at apply (the Hub was not asked)");
      a.detail = what + why;
      draft->downloads.push_back({std::move(a), r.total_bytes.has_value()});
    }

    if (!repo) continue;
    // The revisions berth downloaded of this repo, in the order it downloaded them (the state
    // lists them so): the newest complete ones it left stay for a rollback.
    auto downloaded = o.state.models.find(m.repo_id);
    if (downloaded == o.state.models.end()) continue;
    std::vector<const ObservedRevision*> left;  // oldest first
    for (const std::string& commit : downloaded->second) {
      const ObservedRevision* rev = FindRevision(repo, commit);
      if (!rev) continue;
      bool other_model_wants = false;
      for (const ResolvedModel* other : of_repo[m.repo_id])
        if (other != &r && other->commit == rev->commit && (other->spec->keep || other->used))
          other_model_wants = true;
      if (other_model_wants) continue;
      if (rev->commit == r.commit) {
        if (!wanted_on_disk)
          draft->model_removals.push_back(
              Removal(r, *rev, Reason::kNotUsed, "keep: false and no running service uses it"));
      } else if (!r.commit.empty()) {
        left.push_back(rev);
      }
    }
    const int keep_n = d.host.keep_revisions;
    std::string keep_text = "host.keep_revisions: " + std::to_string(keep_n);
    int kept = 0;
    std::vector<bool> keep(left.size(), false);
    for (size_t i = left.size(); i-- > 0 && wanted_on_disk && kept < keep_n;)
      if (left[i]->complete) {
        keep[i] = true;
        ++kept;
      }
    for (size_t i = 0; i < left.size(); ++i) {
      const ObservedRevision& rev = *left[i];
      if (keep[i]) {
        draft->notes.push_back(
            {address, m.repo_id + "@" + Short(rev.commit) + ", " + FormatBytes(rev.bytes_present) +
                          ", a previous revision, kept for a rollback (" + keep_text + ")"});
        continue;
      }
      std::string why = "replaced by " + Short(r.commit) + "; ";
      if (!wanted_on_disk)
        why += "no service uses the model, so no rollback needs it";
      else if (!rev.complete)
        why += "an incomplete download nothing asks for";
      else if (keep_n == 0)
        why += "no previous revision is kept (" + keep_text + ")";
      else
        why += "older than the " + std::to_string(keep_n) + " previous revision" +
               (keep_n == 1 ? "" : "s") + " kept for a rollback (" + keep_text + ")";
      why += "; removed after its services moved";
      draft->model_removals.push_back(Removal(r, rev, Reason::kOldRevision, why));
    }
  }
  // Repos berth downloaded that no model of the manifest names any more.
  for (const auto& [repo_id, commits] : o.state.models) {
    bool named = of_repo.count(repo_id) > 0;
    const ObservedRepo* repo = index.Repo(repo_id);
    if (named || !repo) continue;
    for (const auto& rev : repo->revisions) {
      if (std::find(commits.begin(), commits.end(), rev.commit) == commits.end()) continue;
      Action a = MakeAction(ActionKind::kRemoveModel, "model/" + repo_id, Reason::kNotInManifest);
      a.As<RemoveModelStep>() = {repo_id, rev.commit};
      a.frees.disk_bytes = rev.bytes_present;
      a.detail = repo_id + "@" + Short(rev.commit) + ", up to " + FormatBytes(rev.bytes_present) +
                 ": berth downloaded it and no manifest model names it any more";
      draft->model_removals.push_back(std::move(a));
    }
  }
}

std::string StorePath(const Desired& d, const Observed& o) {
  return d.host.store.empty() ? o.store.path : d.host.store;
}

}  // namespace berth
