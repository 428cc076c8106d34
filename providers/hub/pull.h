// One model into the store: resolve the revision, list and filter the files, download what is
// missing, verify it, publish the snapshot. Used by `berth pull` and by apply's downloads.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "providers/hub/downloader.h"
#include "providers/hub/hub_types.h"
#include "providers/store/store_fs.h"

namespace berth {

struct PullRequest {
  std::string store;    // HF cache dir
  std::string repo_id;  // "org/name"
  std::string revision = "main";
  std::vector<std::string> include, exclude;
  /// When set (the plan's commit: berth.lock's pin, or what the Hub said when it planned), this
  /// commit is fetched, whatever the revision points at now, and refs/<revision> names it.
  std::string expect_commit;
  /// Free space the download must leave on the store's file system (the manifest's
  /// host.reserve; 0 for `berth pull`).
  uint64_t reserve_bytes = 0;
  /// The file system calls of the free-space check; null is PosixStoreFs().
  StoreFs* fs = nullptr;
};

struct PullResult {
  RepoSnapshot snapshot;  // the commit and the files published
  std::vector<HubFileEntry> files;
  uint64_t bytes_total = 0;
  DownloadStats stats;
  double seconds = 0;
};

/// Pulls `req` with `options` (connections, token, progress). Before a byte is downloaded, the
/// store's file system must have room for what is missing (blobs not there yet, less what their
/// partial files hold) plus req.reserve_bytes: else FailedPrecondition says what is needed and
/// what is free. On failure nothing is published and partial blobs stay for the next run.
Result<PullResult> PullModel(const PullRequest& req, const HubOptions& options);

/// berth's record of repo_id@revision in `store`, as a listing to verify against: the commit
/// refs/<revision> names (a commit revision is its own) and the files of berth's record of it.
/// NotFound when the ref or the record is missing; InvalidArgument, naming the file, when either
/// is damaged. The Hub is not asked.
Result<RepoSnapshot> RecordedSnapshot(const std::string& store, const std::string& repo_id,
                                      const std::string& revision);

/// Re-hashes every file of the snapshot at `commit` against the Hub's listing.
struct VerifyReport {
  std::vector<std::string> ok, corrupt, missing, extra;
};
Result<VerifyReport> VerifySnapshot(const std::string& store, const RepoSnapshot& listing,
                                    const std::vector<HubFileEntry>& wanted);

}  // namespace berth

namespace berth {

/// Removes snapshots/<commit> of `repo_id`, the refs that point at it, berth's record, and the
/// blobs no other snapshot links to. Returns the bytes freed. Missing pieces are not errors.
Result<uint64_t> RemoveRevision(const std::string& store, const std::string& repo_id,
                                const std::string& commit);

}  // namespace berth
