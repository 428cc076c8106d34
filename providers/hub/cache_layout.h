// The Hugging Face cache layout on disk, byte-compatible with huggingface_hub: the paths are
// core/hf_cache.h's HfCachePaths; this adds the I/O (folders, symlinks, refs, berth's
// snapshot record) and berth's chunk map beside a partial blob.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/hf_cache.h"
#include "core/status.h"
#include "providers/hub/hub_types.h"

namespace berth {

class CacheLayout {
 public:
  CacheLayout(const std::string& store, const std::string& repo_id) : paths_(store, repo_id) {}

  const HfCachePaths& paths() const { return paths_; }
  const std::string& repo_dir() const { return paths_.repo_dir(); }
  std::string BlobPath(const std::string& etag) const { return paths_.BlobPath(etag); }
  std::string IncompletePath(const std::string& etag) const { return paths_.IncompletePath(etag); }
  /// berth's record of which chunks of an .incomplete blob are written.
  std::string ChunkMapPath(const std::string& etag) const {
    return paths_.IncompletePath(etag) + ".berth";
  }
  std::string LockPath(const std::string& etag) const { return paths_.LockPath(etag); }
  std::string SnapshotDir(const std::string& commit) const { return paths_.SnapshotDir(commit); }
  std::string RecordPath(const std::string& commit) const { return paths_.RecordPath(commit); }

  /// blobs/, snapshots/, refs/, .berth/ and the lock folder.
  Status MakeDirs() const;
  /// MakeDirs, and snapshots/<commit>/ (empty until Publish) while the blobs download: the store
  /// scan then ties the partial bytes to this commit (a pull stopped by a full disk is planned
  /// again with what it already holds).
  Status BeginSnapshot(const std::string& commit) const;
  /// snapshots/<commit>/<path> as relative symlinks to the blobs (replacing wrong ones), then
  /// the record, then refs/<revision> (not for a commit revision): the snapshot appears only
  /// when all its files are there.
  Status Publish(const RepoSnapshot& snap, const std::vector<HubFileEntry>& files) const;

  /// The commit refs/<revision> names (a commit revision is its own answer; without such a ref,
  /// a short commit of 7 or more hex digits that starts exactly one snapshot of the store, as
  /// berth prints them). NotFound when the ref is missing; InvalidArgument when it holds no
  /// commit.
  Result<std::string> ReadRef(const std::string& revision) const;
  /// The one snapshot commit of the store that starts with `prefix` (7-39 lowercase hex);
  /// nullopt when none or several do.
  std::optional<std::string> CommitWithPrefix(const std::string& prefix) const;
  /// berth's record of the snapshot at `commit`. NotFound when there is none; InvalidArgument
  /// (saying which file) when it is damaged or of another commit.
  Result<SnapshotRecord> ReadRecord(const std::string& commit) const;

 private:
  HfCachePaths paths_;
};

/// The record of `files` published as `snap`.
SnapshotRecord RecordOf(const RepoSnapshot& snap, const std::vector<HubFileEntry>& files);
/// The Hub's form of a recorded file (its blob is the LFS sha256 or the git blob id).
HubFileEntry HubFileOf(const RecordedFile& file);

}  // namespace berth
