#include "providers/hub/pull.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "engine/core/hf_cache.h"
#include "engine/core/units.h"
#include "providers/hub/cache_layout.h"
#include "providers/hub/hasher.h"
#include "providers/hub/hub_api.h"

namespace berth {

namespace {

/// Bytes `files` still take on disk: each distinct blob not yet complete, less what its
/// partial file already holds (a chunked one is sparse: only its written chunks count).
uint64_t BytesStillNeeded(StoreFs& fs, const CacheLayout& layout,
                          const std::vector<HubFileEntry>& files) {
  uint64_t need = 0;
  std::vector<std::string> seen;
  for (const auto& f : files) {
    if (std::find(seen.begin(), seen.end(), f.etag()) != seen.end()) continue;
    seen.push_back(f.etag());
    auto blob = fs.Stat(layout.BlobPath(f.etag()), /*follow=*/false);
    if (blob.ok() && blob->type == FileType::kFile && blob->size == f.size) continue;
    uint64_t held = 0;
    auto partial = fs.Stat(layout.IncompletePath(f.etag()), /*follow=*/false);
    if (partial.ok() && partial->type == FileType::kFile)
      held = partial->allocated == UINT64_MAX ? 0 : partial->allocated;
    need += f.size - std::min(f.size, held);
  }
  return need;
}

/// Refuses a download that would fill the store's file system (or eat into the reserve).
Status CheckFreeSpace(StoreFs& fs, const PullRequest& req, const CacheLayout& layout,
                      const std::string& commit, const std::vector<HubFileEntry>& files) {
  uint64_t need = BytesStillNeeded(fs, layout, files);
  if (need == 0) return Status::Ok();
  // The store may not exist yet: its nearest existing folder is on the same file system.
  std::filesystem::path at = std::filesystem::absolute(req.store);
  Result<DiskSpace> space = fs.SpaceOf(at.string());
  while (!space.ok() && at.has_relative_path()) {
    at = at.parent_path();
    space = fs.SpaceOf(at.string());
  }
  if (!space.ok())
    return space.status().WithContext("checking the free space of the store " + req.store);
  uint64_t usable =
      space->free_bytes > req.reserve_bytes ? space->free_bytes - req.reserve_bytes : 0;
  if (need <= usable) return Status::Ok();
  std::string reserve = req.reserve_bytes
                            ? " less the manifest's host.reserve of " +
                                  FormatBytes(req.reserve_bytes) + " leaves " + FormatBytes(usable)
                            : "";
  return Status::FailedPrecondition(
      "not enough free space for " + req.repo_id + "@" + commit.substr(0, 7) + " in " + req.store +
      ": the download needs " + FormatBytes(need) + ", the file system has " +
      FormatBytes(space->free_bytes) + " free" + reserve + "; nothing was downloaded. Free " +
      FormatBytes(need - usable) +
      " there (older revisions, other files) or pull into a larger file system (--store, "
      "host.store)");
}

}  // namespace

Result<PullResult> PullModel(const PullRequest& req, const HubOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  HubHttp http(options);
  const bool by_commit = !req.expect_commit.empty();
  auto snap = ResolveSnapshot(http, req.repo_id, by_commit ? req.expect_commit : req.revision);
  if (!snap.ok()) return snap.status();
  if (by_commit && snap->commit != req.expect_commit)
    return Status::FailedPrecondition(
        "the Hub answered commit " + snap->commit.substr(0, 7) + " when asked for " + req.repo_id +
        "@" + req.expect_commit.substr(0, 7) + "; nothing was downloaded, plan again");
  // The ref the manifest names points at what was fetched, as huggingface_hub leaves it.
  if (by_commit && !IsCommit(req.revision)) snap->revision = req.revision;
  PullResult result;
  result.snapshot = *snap;
  for (const auto& f : snap->files)
    if (FileWanted(f.path, req.include, req.exclude)) {
      result.files.push_back(f);
      result.bytes_total += f.size;
    }
  if (result.files.empty())
    return Status::InvalidArgument(req.repo_id + "@" + snap->commit.substr(0, 7) + " has " +
                                   std::to_string(snap->files.size()) +
                                   " files and include/exclude keep none of them");
  CacheLayout layout(req.store, req.repo_id);
  BERTH_RETURN_IF_ERROR(
      CheckFreeSpace(req.fs ? *req.fs : PosixStoreFs(), req, layout, snap->commit, result.files));
  BERTH_RETURN_IF_ERROR(layout.BeginSnapshot(snap->commit));
  BERTH_RETURN_IF_ERROR(
      DownloadBlobs(http, layout, req.repo_id, snap->commit, result.files, &result.stats));
  BERTH_RETURN_IF_ERROR(layout.Publish(*snap, result.files));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

Result<RepoSnapshot> RecordedSnapshot(const std::string& store, const std::string& repo_id,
                                      const std::string& revision) {
  CacheLayout layout(store, repo_id);
  Result<std::string> commit = layout.ReadRef(revision);
  if (!commit.ok()) return commit.status();
  Result<SnapshotRecord> record = layout.ReadRecord(*commit);
  if (!record.ok()) return record.status();
  RepoSnapshot snap;
  snap.repo_id = repo_id;
  snap.revision = revision;
  snap.commit = *commit;
  for (const RecordedFile& f : record->files) snap.files.push_back(HubFileOf(f));
  return snap;
}

Result<VerifyReport> VerifySnapshot(const std::string& store, const RepoSnapshot& listing,
                                    const std::vector<HubFileEntry>& wanted) {
  CacheLayout layout(store, listing.repo_id);
  VerifyReport report;
  std::string dir = layout.SnapshotDir(listing.commit);
  for (const auto& f : wanted) {
    std::string path = dir + "/" + f.path;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      report.missing.push_back(f.path);
      continue;
    }
    struct stat st;
    ::fstat(fd, &st);
    if (static_cast<uint64_t>(st.st_size) != f.size) {
      ::close(fd);
      report.corrupt.push_back(f.path + " (size " + std::to_string(st.st_size) + ", expected " +
                               std::to_string(f.size) + ")");
      continue;
    }
    std::string error, digest;
    {
      StreamHasher h(fd, f.size,
                     f.is_lfs() ? StreamHasher::Kind::kSha256 : StreamHasher::Kind::kGitSha1);
      h.Advance(f.size);
      digest = h.Finish(&error);
    }
    ::close(fd);
    if (!error.empty() || digest != f.etag())
      report.corrupt.push_back(f.path + (error.empty()
                                             ? " (hash " + digest + ", expected " + f.etag() + ")"
                                             : " (" + error + ")"));
    else
      report.ok.push_back(f.path);
  }
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) {
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      if (it->is_directory(ec)) continue;
      std::string rel = it->path().lexically_relative(dir).string();
      bool known = false;
      for (const auto& f : wanted) known = known || f.path == rel;
      if (!known) report.extra.push_back(rel);
    }
  }
  return report;
}

}  // namespace berth

namespace berth {

Result<uint64_t> RemoveRevision(const std::string& store, const std::string& repo_id,
                                const std::string& commit) {
  namespace fs = std::filesystem;
  if (!IsCommit(commit))
    return Status::InvalidArgument("cannot remove " + repo_id + "@'" + commit.substr(0, 80) +
                                   "': not a commit (40 lowercase hex digits)");
  CacheLayout layout(store, repo_id);
  std::error_code ec;
  // Only real folders of the store are walked or removed: a link is never followed out of it.
  auto real_dir = [&](const fs::path& p) {
    return fs::symlink_status(p, ec).type() == fs::file_type::directory;
  };
  fs::path repo = layout.repo_dir();
  if (!real_dir(repo)) return uint64_t{0};
  fs::path snapshots = layout.paths().SnapshotsDir();
  // Blobs still linked from other snapshots stay.
  auto blobs_of = [&](const fs::path& snap) {
    std::vector<std::string> out;
    if (!real_dir(snap)) return out;
    for (auto it = fs::recursive_directory_iterator(snap, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_symlink(ec)) continue;
      std::string name = fs::path(fs::read_symlink(it->path(), ec)).filename().string();
      if (IsBlobName(name)) out.push_back(name);  // anything else names no blob of ours
    }
    return out;
  };
  fs::path gone = layout.SnapshotDir(commit);
  std::vector<std::string> candidates;
  std::vector<std::string> kept;
  if (real_dir(snapshots)) {
    candidates = blobs_of(gone);
    for (auto& d : fs::directory_iterator(snapshots, ec))
      if (d.path().filename() != commit)
        for (auto& b : blobs_of(d.path())) kept.push_back(b);
  }
  uint64_t freed = 0;
  if (fs::symlink_status(gone, ec).type() == fs::file_type::symlink) {
    fs::remove(gone, ec);  // the link only, never what it points at
  } else if (real_dir(snapshots)) {
    fs::remove_all(gone, ec);  // does not follow links inside
  }
  if (ec) return Status::IoError("cannot remove " + gone.string() + ": " + ec.message());
  if (real_dir(layout.paths().BlobsDir())) {
    for (const auto& b : candidates) {
      if (std::find(kept.begin(), kept.end(), b) != kept.end()) continue;
      fs::path blob = layout.BlobPath(b);
      if (fs::symlink_status(blob, ec).type() != fs::file_type::regular) continue;
      uint64_t size = fs::file_size(blob, ec);
      if (!ec && fs::remove(blob, ec)) freed += size;
    }
  }
  if (real_dir(layout.paths().RecordsDir())) fs::remove(layout.RecordPath(commit), ec);
  if (!real_dir(layout.paths().RefsDir())) return freed;
  for (auto it = fs::recursive_directory_iterator(layout.paths().RefsDir(), ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->symlink_status(ec).type() != fs::file_type::regular) continue;
    std::ifstream in(it->path());
    std::string c;
    std::getline(in, c);
    if (c == commit) fs::remove(it->path(), ec);
  }
  return freed;
}

}  // namespace berth
