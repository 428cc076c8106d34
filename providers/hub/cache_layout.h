// The Hugging Face cache layout, byte-compatible with huggingface_hub:
//   <store>/models--org--name/{blobs/<etag>, snapshots/<commit>/<path> -> ../../blobs/<etag>,
//   refs/<revision>}, and <store>/.locks/models--org--name/<etag>.lock (flock).
// berth adds <repo>/.berth/<commit>.json: the files it verified, so a no-op run only stats.
#pragma once

#include <string>
#include <vector>

#include "engine/core/atomic_file.h"
#include "engine/core/status.h"
#include "providers/hub/hub_types.h"

namespace berth {

class CacheLayout {
 public:
  CacheLayout(std::string store, std::string repo_id);

  const std::string& repo_dir() const { return repo_dir_; }
  std::string BlobPath(const std::string& etag) const { return repo_dir_ + "/blobs/" + etag; }
  std::string IncompletePath(const std::string& etag) const {
    return BlobPath(etag) + ".incomplete";
  }
  /// berth's record of which chunks of an .incomplete blob are written.
  std::string ChunkMapPath(const std::string& etag) const {
    return BlobPath(etag) + ".incomplete.berth";
  }
  std::string LockPath(const std::string& etag) const;
  std::string SnapshotDir(const std::string& commit) const {
    return repo_dir_ + "/snapshots/" + commit;
  }
  std::string RecordPath(const std::string& commit) const {
    return repo_dir_ + "/.berth/" + commit + ".json";
  }

  /// blobs/, snapshots/, refs/ and the lock folder.
  Status MakeDirs() const;
  /// snapshots/<commit>/<path> as relative symlinks to the blobs (replacing wrong ones), then
  /// the record, then refs/<revision> (not for a commit revision): the snapshot appears only
  /// when all its files are there.
  Status Publish(const RepoSnapshot& snap, const std::vector<HubFileEntry>& files) const;

 private:
  std::string store_, repo_dir_, lock_dir_;
};

}  // namespace berth
