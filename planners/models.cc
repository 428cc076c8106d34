// The model diff: which revisions to download, which to remove, what to keep.
#include <algorithm>

#include "engine/core/hf_cache.h"
#include "engine/core/units.h"
#include "planners/draft.h"
#include "planners/planner.h"

namespace berth {
namespace {

std::string Short(const std::string& commit) { return commit.substr(0, 7); }

bool BerthDownloaded(const Observed& o, const std::string& repo, const std::string& commit) {
  auto it = o.state.models.find(repo);
  return it != o.state.models.end() &&
         std::find(it->second.begin(), it->second.end(), commit) != it->second.end();
}

ResolvedModel Resolve(const ModelSpec& m, const Observed& o) {
  ResolvedModel r;
  r.spec = &m;
  const ObservedRepo* repo = o.FindRepo(m.repo_id);
  const HubInfo* hub = o.FindHub(m.repo_id, m.revision);
  if (IsCommit(m.revision)) {
    r.commit = m.revision;
    r.commit_source = CommitSource::kManifest;
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
  if (repo && !r.commit.empty())
    for (const auto& rev : repo->revisions)
      if (rev.commit == r.commit) r.present = &rev;
  if (hub && (hub->commit == r.commit || r.commit.empty())) {
    uint64_t total = 0;
    for (const auto& f : hub->files)
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
  Action a;
  a.kind = ActionKind::kRemoveModel;
  a.address = "model/" + m.spec->name;
  a.reason = reason;
  a.repo_id = m.spec->repo_id;
  a.commit = rev.commit;
  a.frees.disk_bytes = rev.bytes_present;
  a.detail = m.spec->repo_id + "@" + Short(rev.commit) + ", up to " +
             FormatBytes(rev.bytes_present) + " (blobs shared with kept revisions stay): " + why;
  return a;
}

}  // namespace

void DiffModels(const Desired& d, const Observed& o, Draft* draft) {
  for (const auto& [name, m] : d.models) {
    ResolvedModel r = Resolve(m, o);
    for (const auto& [sname, s] : d.services)
      if (s.model == name && s.state == ServiceState::kRunning) r.used = true;
    draft->models.push_back(r);
  }
  for (const ResolvedModel& r : draft->models) {
    const ModelSpec& m = *r.spec;
    std::string address = "model/" + m.name;
    const ObservedRepo* repo = o.FindRepo(m.repo_id);
    bool wanted_on_disk = m.keep || r.used;
    std::string size_text;
    if (r.total_bytes) size_text = FormatBytes(*r.total_bytes);

    if (r.present && r.present->complete) {
      if (wanted_on_disk) {
        std::string detail = m.repo_id + "@" + Short(r.commit) +
                             (size_text.empty() ? "" : ", " + size_text) + ", complete";
        detail += r.used ? ", in use" : (m.keep ? ", kept (keep: true)" : "");
        draft->notes.push_back({address, detail});
      }
    } else if (wanted_on_disk) {
      Action a;
      a.kind = ActionKind::kDownload;
      a.address = address;
      a.repo_id = m.repo_id;
      a.revision = m.revision;
      a.commit = r.commit;
      a.include = m.include;
      a.exclude = m.exclude;
      uint64_t present = r.present ? r.present->bytes_present : 0;
      bool other_complete = false;
      if (repo)
        for (const auto& rev : repo->revisions) other_complete = other_complete || rev.complete;
      if (r.present) {
        a.reason = Reason::kModelPartial;
      } else if (other_complete) {
        a.reason = Reason::kRevisionChanged;
      } else {
        a.reason = Reason::kModelMissing;
      }
      std::string what = m.repo_id + "@" + (r.commit.empty() ? m.revision : Short(r.commit));
      if (!r.commit.empty() && r.commit != m.revision) what += " (" + m.revision + ")";
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
      switch (a.reason) {
        case Reason::kModelPartial:
          what += ": partial in the store, resuming";
          break;
        case Reason::kRevisionChanged:
          what += ": the manifest asks for another revision";
          break;
        default:
          what += ": not in the store";
          break;
      }
      a.detail = what;
      draft->downloads.push_back({std::move(a), r.total_bytes.has_value()});
    }

    if (!repo) continue;
    for (const auto& rev : repo->revisions) {
      if (!BerthDownloaded(o, m.repo_id, rev.commit)) continue;
      bool is_wanted = rev.commit == r.commit;
      bool other_model_wants = false;
      for (const ResolvedModel& other : draft->models)
        if (&other != &r && other.spec->repo_id == m.repo_id && other.commit == rev.commit &&
            (other.spec->keep || other.used))
          other_model_wants = true;
      if (other_model_wants) continue;
      if (is_wanted && !wanted_on_disk) {
        draft->model_removals.push_back(
            Removal(r, rev, Reason::kNotUsed, "keep: false and no running service uses it"));
      } else if (!is_wanted && !r.commit.empty()) {
        draft->model_removals.push_back(
            Removal(r, rev, Reason::kOldRevision,
                    "replaced by " + Short(r.commit) + "; removed after its services moved"));
      }
    }
  }
  // Repos berth downloaded that no model of the manifest names any more.
  for (const auto& [repo_id, commits] : o.state.models) {
    bool named = false;
    for (const auto& [n, m] : d.models) named = named || m.repo_id == repo_id;
    const ObservedRepo* repo = o.FindRepo(repo_id);
    if (named || !repo) continue;
    for (const auto& rev : repo->revisions) {
      if (std::find(commits.begin(), commits.end(), rev.commit) == commits.end()) continue;
      Action a;
      a.kind = ActionKind::kRemoveModel;
      a.address = "model/" + repo_id;
      a.reason = Reason::kNotInManifest;
      a.repo_id = repo_id;
      a.commit = rev.commit;
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
