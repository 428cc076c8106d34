#include "providers/hub/pull.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/hf_cache.h"
#include "core/read_file.h"
#include "core/units.h"
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

namespace {

namespace fs = std::filesystem;

StreamHasher::Kind HashKind(const HubFileEntry& f) {
  return f.is_lfs() ? StreamHasher::Kind::kSha256 : StreamHasher::Kind::kGitSha1;
}

// What `path` is when it is not a real folder ("a symbolic link to '/etc'"); "" for a real
// folder, kMissing when nothing is there.
constexpr char kMissing[] = "missing";
std::string NotARealFolder(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? kMissing : std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return "";
  if (!S_ISLNK(st.st_mode)) return "not a folder";
  std::error_code ec;
  return "a symbolic link to '" + fs::read_symlink(path, ec).string().substr(0, 200) + "'";
}

// How a file of a snapshot is held: a link into the repo's blobs/ (huggingface_hub's layout) or
// a regular file (its layout without symlinks). `why` says what else it is ("" when missing).
struct Held {
  std::string path;  // the regular file to hash: the blob, or the file itself
  bool missing = false;
  std::string why;
};

Held WhereIsHeld(const CacheLayout& layout, const std::string& commit, const std::string& rel) {
  Held h;
  const std::string snap_dir = layout.SnapshotDir(commit);
  // Every folder on the way must be a real one: a link to /etc is not walked.
  fs::path parent = fs::path(rel).parent_path();
  std::string dir = snap_dir;
  for (const fs::path& part : parent) {
    dir += '/';
    dir += part.string();
    struct stat st;
    if (::lstat(dir.c_str(), &st) != 0) {
      h.missing = true;
      return h;
    }
    if (!S_ISDIR(st.st_mode)) {
      h.why = (dir.substr(snap_dir.size() + 1)) + " is " + NotARealFolder(dir) +
              "; berth follows no folder link in a snapshot";
      return h;
    }
  }
  const std::string path = snap_dir + "/" + rel;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    h.missing = true;
    return h;
  }
  if (S_ISREG(st.st_mode)) {
    h.path = path;
    return h;
  }
  if (!S_ISLNK(st.st_mode)) {
    h.why = "not a file or a link to a blob";
    return h;
  }
  std::error_code ec;
  fs::path target = fs::read_symlink(path, ec);
  if (ec) {
    h.why = "its link cannot be read: " + ec.message();
    return h;
  }
  // Resolved as text, never by following: the link must name blobs/<blob> of this repo.
  fs::path resolved = target.is_absolute()
                          ? target.lexically_normal().lexically_relative(
                                fs::absolute(layout.repo_dir(), ec).lexically_normal())
                          : (fs::path("snapshots") / commit / parent / target).lexically_normal();
  std::string name = resolved.filename().string();
  if (resolved.parent_path() != fs::path("blobs") || !IsBlobName(name)) {
    h.why = "a link to '" + target.string().substr(0, 200) +
            "', outside the repo's blobs/ (berth neither follows nor hashes it)";
    return h;
  }
  h.path = layout.BlobPath(name);
  return h;
}

}  // namespace

Result<VerifyReport> VerifySnapshot(const std::string& store, const RepoSnapshot& listing,
                                    const std::vector<HubFileEntry>& wanted) {
  CacheLayout layout(store, listing.repo_id);
  VerifyReport report;
  std::string dir = layout.SnapshotDir(listing.commit);
  // The repo's folders, as berth writes them: real folders (a link would lead out of the store).
  for (const std::string& d : {layout.repo_dir(), layout.paths().SnapshotsDir(), dir}) {
    std::string what = NotARealFolder(d);
    if (what == kMissing) break;  // nothing there: every file is reported missing below
    if (!what.empty())
      return Status::FailedPrecondition(
          d + " is " + what +
          ", not a folder of the store; berth verifies nothing through it: remove it, then pull "
          "the model again");
  }
  std::string blobs_problem = NotARealFolder(layout.paths().BlobsDir());
  if (blobs_problem == kMissing) blobs_problem.clear();  // each blob is then missing
  for (const auto& f : wanted) {
    Held held = WhereIsHeld(layout, listing.commit, f.path);
    if (held.missing) {
      report.missing.push_back(f.path);
      continue;
    }
    if (held.why.empty() && held.path != dir + "/" + f.path && !blobs_problem.empty())
      held.why = layout.paths().BlobsDir() + " is " + blobs_problem;
    if (!held.why.empty()) {
      report.corrupt.push_back(f.path + " (" + held.why + ")");
      continue;
    }
    uint64_t size = 0;
    // Only a regular file, never a FIFO (that would block) nor another link.
    Result<int> fd = OpenRegularFile(held.path, {.max_bytes = kMaxRepoFileBytes}, &size);
    if (!fd.ok()) {
      if (fd.status().code() == Status::Code::kNotFound)
        report.missing.push_back(f.path);
      else
        report.corrupt.push_back(f.path + " (" + fd.status().message() + ")");
      continue;
    }
    if (size != f.size) {
      ::close(*fd);
      report.corrupt.push_back(f.path + " (size " + std::to_string(size) + ", expected " +
                               std::to_string(f.size) + ")");
      continue;
    }
    std::string error;
    std::string digest = HashFile(*fd, f.size, HashKind(f), &error);
    ::close(*fd);
    if (!error.empty() || digest != f.etag())
      report.corrupt.push_back(f.path + (error.empty()
                                             ? " (hash " + digest + ", expected " + f.etag() + ")"
                                             : " (" + error + ")"));
    else
      report.ok.push_back(f.path);
  }
  std::error_code ec;
  if (NotARealFolder(dir).empty()) {
    // Links to folders are not walked into (the iterator's default), and listed as extra.
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (it->symlink_status(ec).type() == fs::file_type::directory) continue;
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
    Result<std::string> ref = ReadRegularFile(it->path(), {.max_bytes = kMaxRefFileBytes});
    if (ref.ok() && ref->substr(0, ref->find('\n')) == commit) fs::remove(it->path(), ec);
  }
  return freed;
}

}  // namespace berth
