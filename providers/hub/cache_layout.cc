#include "providers/hub/cache_layout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/atomic_file.h"
#include "core/read_file.h"

namespace berth {
namespace {

namespace fs = std::filesystem;

Status MkdirAll(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IoError("cannot create " + dir + ": " + ec.message());
  return Status::Ok();
}

/// `dir` exists as a real folder: created when missing, refused when it is a symlink or a file
/// (a link there would make berth write wherever it points, outside the store).
Status MakeRealDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::IoError("cannot create " + dir + ": " + std::strerror(errno));
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0)
    return Status::IoError("cannot stat " + dir + ": " + std::strerror(errno));
  if (S_ISLNK(st.st_mode))
    return Status::FailedPrecondition(dir +
                                      " is a symlink; berth does not write through links in the "
                                      "store (they could point outside it): remove it");
  if (!S_ISDIR(st.st_mode)) return Status::FailedPrecondition(dir + " is not a folder; remove it");
  return Status::Ok();
}

/// `base`/`rel`, each folder of `rel` a real folder below `base` (itself checked before).
Status MakeRealDirsBelow(const std::string& base, const std::string& rel) {
  std::string dir = base;
  size_t start = 0;
  while (start < rel.size()) {
    size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    dir.append("/").append(rel, start, end - start);
    BERTH_RETURN_IF_ERROR(MakeRealDir(dir));
    start = end + 1;
  }
  return Status::Ok();
}

/// The whole of a small metadata file berth writes (a ref, its record), at most `max_bytes`;
/// NotFound when it is missing; a link, a FIFO, a device or a bigger file is refused.
Result<std::string> ReadSmall(const std::string& path, uint64_t max_bytes) {
  return ReadRegularFile(path, {.max_bytes = max_bytes});
}

}  // namespace

Status CacheLayout::MakeDirs() const {
  // The store itself is the manifest's choice (it may be a link); below it, every folder berth
  // writes in must be a real one.
  std::string store = fs::path(repo_dir()).parent_path().string();
  BERTH_RETURN_IF_ERROR(MkdirAll(store));
  for (const std::string& d :
       {repo_dir(), paths_.BlobsDir(), paths_.SnapshotsDir(), paths_.RefsDir(), paths_.RecordsDir(),
        store + "/.locks", paths_.lock_dir()})
    BERTH_RETURN_IF_ERROR(MakeRealDir(d));
  return Status::Ok();
}

// The messages below start with the character '\'', not the string "'": g++ 12 -O3 warns
// falsely on "'" + std::string&& (-Wrestrict, GCC bug 105329).
Status CacheLayout::BeginSnapshot(const std::string& commit) const {
  if (!IsCommit(commit))
    return Status::InvalidArgument('\'' + commit.substr(0, 80) + "' is not a commit");
  BERTH_RETURN_IF_ERROR(MakeDirs());
  return MakeRealDir(SnapshotDir(commit));
}

Status CacheLayout::Publish(const RepoSnapshot& snap,
                            const std::vector<HubFileEntry>& files) const {
  if (!IsCommit(snap.commit))
    return Status::InvalidArgument('\'' + snap.commit.substr(0, 80) + "' is not a commit");
  BERTH_RETURN_IF_ERROR(MakeDirs());
  std::string snap_dir = SnapshotDir(snap.commit);
  BERTH_RETURN_IF_ERROR(MakeRealDir(snap_dir));
  for (const HubFileEntry& f : files) {
    if (!IsSafeRepoPath(f.path) || !IsBlobName(f.etag()))
      return Status::InvalidArgument(snap.repo_id + ": file '" + f.path.substr(0, 200) +
                                     "' with blob '" + f.etag().substr(0, 80) +
                                     "' cannot be linked: not a safe path or not a blob name");
    fs::path link = fs::path(snap_dir) / f.path;
    BERTH_RETURN_IF_ERROR(MakeRealDirsBelow(snap_dir, fs::path(f.path).parent_path().string()));
    std::string target = SnapshotLinkTarget(f.path, f.etag());
    char buf[4096];
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    if (n < 0 || std::string(buf, static_cast<size_t>(n)) != target) {
      std::string tmp = link.string() + ".berth-tmp";
      ::unlink(tmp.c_str());
      if (::symlink(target.c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), link.c_str()) != 0)
        return Status::IoError("cannot link " + link.string() + ": " + std::strerror(errno));
    }
  }
  BERTH_RETURN_IF_ERROR(
      WriteFileAtomically(RecordPath(snap.commit), RecordOf(snap, files).ToJson()));
  if (snap.revision != snap.commit) {
    if (!IsRevision(snap.revision))
      return Status::InvalidArgument('\'' + snap.revision + "' is not a revision");
    fs::path ref = paths_.RefPath(snap.revision);
    BERTH_RETURN_IF_ERROR(
        MakeRealDirsBelow(paths_.RefsDir(), fs::path(snap.revision).parent_path().string()));
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

Result<std::string> CacheLayout::ReadRef(const std::string& revision) const {
  if (IsCommit(revision)) return revision;
  if (!IsRevision(revision))
    return Status::InvalidArgument('\'' + revision.substr(0, 80) + "' is not a revision");
  std::string path = paths_.RefPath(revision);
  Result<std::string> text = ReadSmall(path, kMaxRefFileBytes);
  if (!text.ok() && text.status().code() == Status::Code::kNotFound)
    if (auto full = CommitWithPrefix(revision)) return *full;
  if (!text.ok()) return text.status();
  std::string commit = *text;
  if (!commit.empty() && commit.back() == '\n') commit.pop_back();  // written by hand
  if (!IsCommit(commit)) return Status::InvalidArgument(path + " does not hold a commit");
  return commit;
}

std::optional<std::string> CacheLayout::CommitWithPrefix(const std::string& prefix) const {
  // As git does: 7 to 39 lowercase hex digits that start exactly one commit of the store.
  if (prefix.size() < 7 || prefix.size() >= 40 ||
      prefix.find_first_not_of("0123456789abcdef") != std::string::npos)
    return std::nullopt;
  std::error_code ec;
  std::optional<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(paths_.SnapshotsDir(), ec)) {
    std::string name = entry.path().filename().string();
    if (!IsCommit(name) || name.compare(0, prefix.size(), prefix) != 0) continue;
    if (found) return std::nullopt;  // ambiguous: the caller says the ref is missing
    found = name;
  }
  return found;
}

Result<SnapshotRecord> CacheLayout::ReadRecord(const std::string& commit) const {
  if (!IsCommit(commit))
    return Status::InvalidArgument('\'' + commit.substr(0, 80) + "' is not a commit");
  std::string path = RecordPath(commit);
  Result<std::string> text = ReadSmall(path, kMaxRecordFileBytes);
  if (!text.ok()) return text.status();
  Result<SnapshotRecord> record = SnapshotRecord::FromJson(*text);
  if (!record.ok()) return record.status().WithContext(path);
  if (record->commit != commit)
    return Status::InvalidArgument(path + ": the record of " + record->commit + ", not " + commit);
  return record;
}

SnapshotRecord RecordOf(const RepoSnapshot& snap, const std::vector<HubFileEntry>& files) {
  SnapshotRecord record;
  record.repo_id = snap.repo_id;
  record.commit = snap.commit;
  for (const HubFileEntry& f : files) record.files.push_back({f.path, f.size, f.etag()});
  record.bytes_total = TotalBytes(record.files);
  return record;
}

HubFileEntry HubFileOf(const RecordedFile& file) {
  HubFileEntry e;
  e.path = file.path;
  e.size = file.size;
  (file.is_lfs() ? e.lfs_sha256 : e.git_oid) = file.blob;
  return e;
}

}  // namespace berth
