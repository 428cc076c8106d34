#include "providers/store/store_scan.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "core/gguf_header.h"
#include "core/hf_cache.h"
#include "core/model_config.h"

namespace berth {
namespace {

constexpr size_t kMaxRefBytes = kMaxRefFileBytes;
constexpr size_t kMaxRecordBytes = kMaxRecordFileBytes;
/// Lexical "a/b/../c" -> "a/c"; nullopt if ".." climbs above the start.
std::optional<std::string> Normalize(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = std::min(path.find('/', pos), path.size());
    std::string_view p = path.substr(pos, slash - pos);
    pos = slash + 1;
    if (p.empty() || p == ".") continue;
    if (p == "..") {
      if (parts.empty()) return std::nullopt;
      parts.pop_back();
    } else {
      parts.push_back(p);
    }
  }
  std::string out;
  for (auto p : parts) (out += out.empty() ? "" : "/") += p;
  return out;
}

/// Lists `dir`; a missing directory is empty.
Result<std::vector<DirEntry>> ListOrEmpty(StoreFs& fs, const std::string& dir) {
  Result<std::vector<DirEntry>> r = fs.ListDir(dir);
  if (!r.ok() && r.status().code() == Status::Code::kNotFound) return std::vector<DirEntry>{};
  return r;
}

struct Blobs {
  std::map<std::string, uint64_t> sizes;  // complete blobs by name
  uint64_t partial_bytes = 0;             // *.incomplete
  bool has_partials = false;
};

struct Snapshot {
  std::map<std::string, uint64_t> files;  // path in the snapshot -> size, present files only
  std::set<std::string> distinct;         // blob names (or paths) counted in bytes
  uint64_t bytes = 0;
  int missing = 0;  // dangling symlinks
};

class RepoScan {
 public:
  RepoScan(StoreFs& fs, const std::string& store, const std::string& repo_id)
      : fs_(fs), paths_(store, repo_id) {}

  Result<std::vector<ObservedRevision>> Run() {
    BERTH_RETURN_IF_ERROR(ReadBlobs());
    BERTH_RETURN_IF_ERROR(ReadRefs(paths_.RefsDir(), ""));
    Result<std::vector<DirEntry>> commits = ListOrEmpty(fs_, paths_.SnapshotsDir());
    if (!commits.ok()) return commits.status();
    std::vector<ObservedRevision> revs;
    std::vector<int64_t> mtimes;
    for (const DirEntry& c : *commits) {
      // Only a commit names a revision (berth writes nothing else there); another folder is no
      // revision of this repo, and a link is not followed out of the store.
      if (c.type != FileType::kDir || !IsCommit(c.name)) continue;
      std::string snap_dir = paths_.SnapshotDir(c.name);
      Result<FileStat> st = fs_.Stat(snap_dir, /*follow=*/false);
      Snapshot snap;
      BERTH_RETURN_IF_ERROR(Walk(snap_dir, "snapshots/" + c.name, "", &snap));
      ObservedRevision rev;
      rev.commit = c.name;
      rev.bytes_present = snap.bytes;
      JudgeCompleteness(snap, &rev);
      ReadModelFacts(snap_dir, snap, &rev);
      revs.push_back(std::move(rev));
      mtimes.push_back(st.ok() ? st->mtime_ns : 0);
    }
    // Commits named by a ref but without a snapshot directory: a download that just began.
    for (const auto& [commit, names] : refs_) {
      bool seen = std::any_of(revs.begin(), revs.end(),
                              [&](const ObservedRevision& r) { return r.commit == commit; });
      if (seen) continue;
      ObservedRevision rev;
      rev.commit = commit;
      revs.push_back(std::move(rev));
      mtimes.push_back(ref_mtimes_[commit]);
    }
    for (ObservedRevision& rev : revs) {
      auto it = refs_.find(rev.commit);
      if (it != refs_.end()) rev.refs = it->second;
    }
    if (blobs_.has_partials) AttributePartials(&revs, mtimes);
    std::sort(revs.begin(), revs.end(), [](const ObservedRevision& a, const ObservedRevision& b) {
      return a.commit < b.commit;
    });
    return revs;
  }

 private:
  Status ReadBlobs() {
    Result<std::vector<DirEntry>> entries = ListOrEmpty(fs_, paths_.BlobsDir());
    if (!entries.ok()) return entries.status();
    for (const DirEntry& e : *entries) {
      // A blob is a file of its own: a link there is nothing the Hub wrote (it could lead to
      // /proc/kmsg or /etc/shadow) and is not part of any model.
      Result<FileStat> st = fs_.Stat(paths_.BlobPath(e.name), /*follow=*/false);
      if (!st.ok()) {
        if (st.status().code() == Status::Code::kNotFound) continue;  // removed meanwhile
        return st.status();
      }
      if (st->type != FileType::kFile) continue;
      if (IsPartialBlobName(e.name)) {
        // What is really written: a chunked partial is sized to the whole blob before its
        // chunks arrive, and a full disk stops it with holes.
        blobs_.partial_bytes += std::min(st->size, st->allocated);
        blobs_.has_partials = true;
      } else {
        blobs_.sizes[e.name] = st->size;
      }
    }
    return Status::Ok();
  }

  Status ReadRefs(const std::string& dir, const std::string& prefix) {
    Result<std::vector<DirEntry>> entries = ListOrEmpty(fs_, dir);
    if (!entries.ok()) return entries.status();
    for (const DirEntry& e : *entries) {
      std::string path = dir + "/" + e.name;
      if (e.type == FileType::kDir) {
        BERTH_RETURN_IF_ERROR(ReadRefs(path, prefix + e.name + "/"));
        continue;
      }
      if (e.type != FileType::kFile) continue;
      Result<std::string> text = fs_.ReadSmallFile(path, kMaxRefBytes, /*follow=*/false);
      if (!text.ok()) {
        if (text.status().code() == Status::Code::kNotFound) continue;
        return text.status();
      }
      std::string commit = *text;
      if (!commit.empty() && commit.back() == '\n') commit.pop_back();
      if (!IsCommit(commit)) continue;  // not a commit: no revision, never a path
      refs_[commit].push_back(prefix + e.name);
      Result<FileStat> st = fs_.Stat(path, /*follow=*/false);
      if (st.ok()) ref_mtimes_[commit] = std::max(ref_mtimes_[commit], st->mtime_ns);
    }
    for (auto& [commit, names] : refs_) std::sort(names.begin(), names.end());
    return Status::Ok();
  }

  /// Adds the files under `dir` (`rel_dir` from the repo, `in_snap` from the snapshot) to `snap`.
  Status Walk(const std::string& dir, const std::string& rel_dir, const std::string& in_snap,
              Snapshot* snap) {
    Result<std::vector<DirEntry>> entries = ListOrEmpty(fs_, dir);
    if (!entries.ok()) return entries.status();
    for (const DirEntry& e : *entries) {
      std::string path = dir + "/" + e.name;
      std::string file = in_snap.empty() ? e.name : in_snap + "/" + e.name;
      switch (e.type) {
        case FileType::kDir:
          BERTH_RETURN_IF_ERROR(Walk(path, rel_dir + "/" + e.name, file, snap));
          break;
        case FileType::kSymlink:
          BERTH_RETURN_IF_ERROR(AddLink(path, rel_dir, file, snap));
          break;
        case FileType::kFile: {  // HF_HUB_DISABLE_SYMLINKS: the blob was moved here
          Result<FileStat> st = fs_.Stat(path, /*follow=*/false);
          if (!st.ok()) {
            if (st.status().code() != Status::Code::kNotFound) return st.status();
            ++snap->missing;
            break;
          }
          Count(file, "file:" + rel_dir + "/" + e.name, st->size, snap);
          break;
        }
        case FileType::kOther:
          break;
      }
    }
    return Status::Ok();
  }

  Status AddLink(const std::string& path, const std::string& rel_dir, const std::string& file,
                 Snapshot* snap) {
    Result<std::string> target = fs_.ReadLink(path);
    if (!target.ok()) {
      if (target.status().code() != Status::Code::kNotFound) return target.status();
      ++snap->missing;
      return Status::Ok();
    }
    // The usual case, "../../blobs/<name>": resolved against the blob listing, no syscall.
    if (!target->empty() && (*target)[0] != '/') {
      std::optional<std::string> in_repo = Normalize(rel_dir + "/" + *target);
      if (in_repo && in_repo->rfind("blobs/", 0) == 0 &&
          in_repo->find('/', 6) == std::string::npos) {
        std::string blob = in_repo->substr(6);
        auto it = blobs_.sizes.find(blob);
        if (it == blobs_.sizes.end()) {
          ++snap->missing;
        } else {
          Count(file, "blob:" + blob, it->second, snap);
        }
        return Status::Ok();
      }
    }
    // Anything else (an absolute link, a link out of the repo's blobs) leaves what berth
    // downloaded: not part of the model, as a dangling link is not.
    ++snap->missing;
    return Status::Ok();
  }

  static void Count(const std::string& file, const std::string& key, uint64_t size,
                    Snapshot* snap) {
    snap->files[file] = size;
    if (snap->distinct.insert(key).second) snap->bytes += size;
  }

  /// What the preflight checks: config.json's architectures and the bytes of the weights. The
  /// snapshot's files are the Hub's, untrusted: a bounded read, a parse that cannot throw.
  void ReadModelFacts(const std::string& snap_dir, const Snapshot& snap, ObservedRevision* rev) {
    if (snap.files.empty()) return;
    uint64_t weights = 0;
    bool any = false;
    for (const auto& [path, size] : snap.files) {
      constexpr std::string_view kExt = ".safetensors";
      if (path.size() > kExt.size() &&
          path.compare(path.size() - kExt.size(), kExt.size(), kExt) == 0) {
        weights += size;
        any = true;
      }
    }
    if (any) rev->weights_bytes = weights;
    if (!rev->complete) return;  // read once the download is done: the planner asks no sooner
    ModelConfig config;
    auto it = snap.files.find("config.json");  // present and a regular file (Walk saw to it)
    if (it == snap.files.end()) {
      config.problem = "is missing from the snapshot";
    } else if (it->second > kMaxModelConfigBytes) {
      config.problem = "is larger than " + std::to_string(kMaxModelConfigBytes) +
                       " bytes; berth does not read it";
    } else {
      Result<std::string> text = fs_.ReadSmallFile(snap_dir + "/config.json", kMaxModelConfigBytes,
                                                   /*follow=*/true);
      config = text.ok() ? ParseModelConfig(*text)
                         : ModelConfig{{}, "cannot be read (" + text.status().message() + ")"};
    }
    rev->config = std::move(config);
    ReadGgufHeaders(snap_dir, snap, rev);
  }

  /// The header of each *.gguf file (at most kMaxGgufFiles of them): llama.cpp's model format,
  /// read as far as kMaxGgufHeaderBytes, untrusted.
  void ReadGgufHeaders(const std::string& snap_dir, const Snapshot& snap, ObservedRevision* rev) {
    constexpr size_t kMaxGgufFiles = 256;
    std::map<std::string, GgufHeader> found;
    for (const auto& [path, size] : snap.files) {
      constexpr std::string_view kExt = ".gguf";
      if (path.size() <= kExt.size() ||
          path.compare(path.size() - kExt.size(), kExt.size(), kExt) != 0)
        continue;
      if (found.size() == kMaxGgufFiles) break;
      Result<std::string> head = fs_.ReadPrefix(snap_dir + "/" + path, kMaxGgufHeaderBytes,
                                                /*follow=*/true);
      GgufHeader h;
      if (head.ok())
        h = ParseGgufHeader(*head);
      else
        h.problem = "cannot be read (" + head.status().message() + ")";
      found[path] = h;
    }
    if (!found.empty()) rev->gguf = std::move(found);
  }

  void JudgeCompleteness(const Snapshot& snap, ObservedRevision* rev) {
    Result<std::string> text = fs_.ReadSmallFile(paths_.RecordPath(rev->commit), kMaxRecordBytes,
                                                 /*follow=*/false);
    if (!text.ok() && text.status().code() == Status::Code::kNotFound) {
      // No record: judge by the links.
      rev->complete = snap.missing == 0 && !snap.files.empty();
      if (rev->complete) rev->bytes_total = snap.bytes;
      return;
    }
    if (!text.ok()) return;  // a record berth cannot read: incomplete, so it is verified again
    Result<SnapshotRecord> record = SnapshotRecord::FromJson(*text);
    if (!record.ok() || record->commit != rev->commit) return;  // likewise
    bool complete = true;
    for (const RecordedFile& f : record->files) {
      auto it = snap.files.find(f.path);
      complete = complete && it != snap.files.end() && it->second == f.size;
    }
    rev->complete = complete;
    rev->bytes_total = record->bytes_total;
  }

  void AttributePartials(std::vector<ObservedRevision>* revs, const std::vector<int64_t>& mtimes) {
    int newest = -1;
    for (size_t i = 0; i < revs->size(); ++i) {
      if ((*revs)[i].complete) continue;
      if (newest < 0 || mtimes[i] > mtimes[static_cast<size_t>(newest)] ||
          (mtimes[i] == mtimes[static_cast<size_t>(newest)] &&
           (*revs)[i].commit > (*revs)[static_cast<size_t>(newest)].commit))
        newest = static_cast<int>(i);
    }
    if (newest < 0) {
      ObservedRevision rev;  // commit "": a download whose snapshot is not there yet
      rev.bytes_present = blobs_.partial_bytes;
      revs->push_back(std::move(rev));
      return;
    }
    (*revs)[static_cast<size_t>(newest)].bytes_present += blobs_.partial_bytes;
  }

  StoreFs& fs_;
  HfCachePaths paths_;
  Blobs blobs_;
  std::map<std::string, std::vector<std::string>> refs_;  // commit -> ref names
  std::map<std::string, int64_t> ref_mtimes_;
};

Status Explain(const Status& s, const std::string& store_path) {
  return s.WithContext("scanning the model store " + store_path +
                       " (models present are unknown, so no plan can be made; check that it is "
                       "readable by the user berth runs as)");
}

}  // namespace

void ReadGgufModels(const std::map<std::string, std::set<std::string>>& files, StoreFs& fs,
                    ObservedStore* store) {
  for (ObservedRepo& repo : store->repos) {
    auto wanted = files.find(repo.repo_id);
    if (wanted == files.end()) continue;
    for (ObservedRevision& rev : repo.revisions) {
      if (!rev.complete || !rev.gguf) continue;
      const std::string snap_dir = SnapshotPath(store->path, repo.repo_id, rev.commit);
      for (const std::string& file : wanted->second) {
        auto h = rev.gguf->find(file);
        if (h == rev.gguf->end() || !h->second.problem.empty()) continue;
        GgufModel m;
        for (size_t bytes : {kMaxGgufHeaderBytes, size_t{16} << 20, kMaxGgufModelBytes}) {
          Result<std::string> head = fs.ReadPrefix(snap_dir + "/" + file, bytes, /*follow=*/true);
          if (!head.ok()) {
            m = GgufModel{};
            m.problem = "cannot be read (" + head.status().message() + ")";
            break;
          }
          m = ParseGgufModel(*head);
          // Cut short where the file goes on: read further.
          if (head->size() < bytes || m.problem.rfind("is cut short", 0) != 0) break;
        }
        h->second.model = std::move(m);
      }
    }
  }
}

Result<ObservedStore> ScanStore(const std::string& store_path) {
  return ScanStore(store_path, PosixStoreFs());
}

Result<ObservedStore> ScanStore(const std::string& store_path, StoreFs& fs) {
  ObservedStore store;
  store.path = store_path;
  Result<FileStat> st = fs.Stat(store_path, /*follow=*/true);
  if (!st.ok() && st.status().code() != Status::Code::kNotFound)
    return Explain(st.status(), store_path);
  if (!st.ok()) {
    store.exists = false;
    // The nearest existing parent tells how much room the store will have once created.
    std::string parent = store_path;
    while (true) {
      size_t slash = parent.find_last_of('/');
      parent = slash == std::string::npos ? std::string(".")
               : slash == 0               ? std::string("/")
                                          : parent.substr(0, slash);
      Result<DiskSpace> space = fs.SpaceOf(parent);
      if (space.ok()) {
        store.total_bytes = space->total_bytes;
        store.free_bytes = space->free_bytes;
        break;
      }
      if (parent == "/" || parent == ".") break;
    }
    return store;
  }
  if (st->type != FileType::kDir) {
    return Status::InvalidArgument("the model store " + store_path +
                                   " is not a directory: models cannot be stored there; point "
                                   "the manifest's store at a directory");
  }
  Result<DiskSpace> space = fs.SpaceOf(store_path);
  if (!space.ok()) return Explain(space.status(), store_path);
  store.total_bytes = space->total_bytes;
  store.free_bytes = space->free_bytes;

  Result<std::vector<DirEntry>> entries = fs.ListDir(store_path);
  if (!entries.ok()) return Explain(entries.status(), store_path);
  for (const DirEntry& e : *entries) {
    if (e.type != FileType::kDir) continue;
    std::optional<std::string> repo_id = RepoIdFromFolderName(e.name);
    if (!repo_id) continue;
    Result<std::vector<ObservedRevision>> revs = RepoScan(fs, store_path, *repo_id).Run();
    if (!revs.ok()) return Explain(revs.status(), store_path);
    store.repos.push_back(ObservedRepo{*repo_id, std::move(revs).value()});
  }
  std::sort(store.repos.begin(), store.repos.end(),
            [](const ObservedRepo& a, const ObservedRepo& b) { return a.repo_id < b.repo_id; });
  return store;
}

}  // namespace berth
