#include "providers/hub/cache_layout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace berth {
namespace {

namespace fs = std::filesystem;

std::string FolderName(const std::string& repo_id) {
  std::string f = "models--" + repo_id;
  for (size_t at = f.find('/'); at != std::string::npos; at = f.find('/')) f.replace(at, 1, "--");
  return f;
}

Status MkdirAll(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

CacheLayout::CacheLayout(std::string store, std::string repo_id) : store_(std::move(store)) {
  repo_dir_ = store_ + "/" + FolderName(repo_id);
  lock_dir_ = store_ + "/.locks/" + FolderName(repo_id);
}

std::string CacheLayout::LockPath(const std::string& etag) const {
  return lock_dir_ + "/" + etag + ".lock";
}

Status CacheLayout::MakeDirs() const {
  for (const char* d : {"/blobs", "/snapshots", "/refs", "/.berth"})
    BERTH_RETURN_IF_ERROR(MkdirAll(repo_dir_ + d));
  return MkdirAll(lock_dir_);
}

Status CacheLayout::Publish(const RepoSnapshot& snap,
                            const std::vector<HubFileEntry>& files) const {
  std::string snap_dir = SnapshotDir(snap.commit);
  nlohmann::ordered_json record;
  record["format_version"] = 1;
  record["repo_id"] = snap.repo_id;
  record["commit"] = snap.commit;
  nlohmann::ordered_json listed = nlohmann::ordered_json::array();
  uint64_t total = 0;
  for (const HubFileEntry& f : files) {
    fs::path link = fs::path(snap_dir) / f.path;
    BERTH_RETURN_IF_ERROR(MkdirAll(link.parent_path().string()));
    // ../../blobs/<etag> from snapshots/<commit>/, one more ../ per folder level of the path.
    std::string target = "../../blobs/" + f.etag();
    for (char c : f.path)
      if (c == '/') target = "../" + target;
    char buf[4096];
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    if (n < 0 || std::string(buf, static_cast<size_t>(n)) != target) {
      std::string tmp = link.string() + ".berth-tmp";
      ::unlink(tmp.c_str());
      if (::symlink(target.c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), link.c_str()) != 0)
        return Status::IoError("cannot link " + link.string() + ": " + std::strerror(errno));
    }
    listed.push_back({{"path", f.path}, {"size", f.size}, {"blob", f.etag()}});
    total += f.size;
  }
  record["files"] = std::move(listed);
  record["bytes_total"] = total;
  BERTH_RETURN_IF_ERROR(WriteFileAtomically(RecordPath(snap.commit), record.dump(1) + "\n"));
  if (snap.revision != snap.commit) {
    fs::path ref = fs::path(repo_dir_) / "refs" / snap.revision;
    BERTH_RETURN_IF_ERROR(MkdirAll(ref.parent_path().string()));
    // No trailing newline: huggingface_hub reads refs without stripping.
    BERTH_RETURN_IF_ERROR(WriteFileAtomically(ref.string(), snap.commit));
  }
  int dfd = ::open(snap_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

}  // namespace berth
