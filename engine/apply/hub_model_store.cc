#include "engine/apply/model_store.h"

#include "providers/hub/pull.h"

namespace berth {

Result<Fetched> HubModelStore::Download(
    const DownloadStep& a, const std::atomic<bool>* cancel,
    const std::function<void(const PullProgress&)>& on_progress) {
  PullRequest req;
  req.store = store_;
  req.repo_id = a.repo_id;
  req.revision = a.revision;
  req.include = a.include;
  req.exclude = a.exclude;
  req.expect_commit = a.commit;
  req.reserve_bytes = reserve_bytes_;
  HubOptions hub = hub_;
  hub.cancel = cancel;
  hub.on_progress = on_progress;
  auto r = PullModel(req, hub);
  if (!r.ok()) return r.status();
  Fetched f;
  f.commit = r->snapshot.commit;
  f.bytes_total = r->bytes_total;
  f.bytes_fetched = r->stats.bytes_fetched;
  f.files = static_cast<int>(r->files.size());
  f.seconds = r->seconds;
  return f;
}

Result<uint64_t> HubModelStore::Remove(const std::string& repo_id, const std::string& commit) {
  return RemoveRevision(store_, repo_id, commit);
}

}  // namespace berth
