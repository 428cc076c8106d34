// The model store's rules, in one place: the Hugging Face cache layout (hf-hub-protocol.md §4),
// berth's snapshot record beside it, the include/exclude filter, what a commit and an hf://
// source look like, and which store berth uses by default. Pure: no I/O (the default store
// reads the environment through the lookup it is given).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace berth {

// ---- Names -------------------------------------------------------------------------------

/// A commit as the Hub names it: exactly 40 lowercase hex digits.
bool IsCommit(std::string_view revision);

/// A branch, tag or commit as the Hub takes it: 1-255 of [A-Za-z0-9._/+-], starting with a
/// letter or digit, without "..".
bool IsRevision(std::string_view revision);

/// A path relative to a snapshot: non-empty, not absolute, no ".." component.
bool IsSnapshotRelativePath(std::string_view path);

/// A repo file path berth may write below a snapshot (the Hub's listing, berth's record): at most
/// 4096 bytes, not absolute, no empty, "." or ".." segment, no backslash, NUL or other control
/// character. Stricter than IsSnapshotRelativePath, which manifests use.
bool IsSafeRepoPath(std::string_view path);

/// A blob's name in the store: an LFS file's sha256 (64 lowercase hex digits) or a regular
/// file's git blob sha1 (40). Anything else must never name a file.
bool IsBlobName(std::string_view name);
/// 64 lowercase hex digits (a sha256).
bool IsSha256Name(std::string_view name);
/// 40 lowercase hex digits (a git blob sha1; a commit looks the same).
bool IsGitSha1Name(std::string_view name);

/// The largest file berth accepts from the Hub (2^50 bytes, 1 PiB): sizes beyond it are
/// refused before they size a buffer, a file or a loop.
inline constexpr uint64_t kMaxRepoFileBytes = uint64_t{1} << 50;

/// A model named by `hf://org/name[@revision]`.
struct HfSource {
  std::string repo_id;            // "org/name"
  std::string revision = "main";  // as written after '@', else "main"
  bool revision_given = false;    // the source had "@revision"
};

/// Parses "hf://org/name" or "hf://org/name@revision". org and name are each
/// ^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$ without "--" or ".." (a "--" would make the cache folder
/// ambiguous); the revision must pass IsRevision. InvalidArgument says what is wrong and how to
/// write it.
Result<HfSource> ParseHfSource(std::string_view source);

// ---- The cache layout --------------------------------------------------------------------

/// "org/name" -> "models--org--name", "gpt2" -> "models--gpt2" (huggingface_hub's
/// repo_folder_name).
std::string RepoFolderName(std::string_view repo_id);

/// The inverse: "models--org--name" -> "org/name"; nullopt for anything that is not a model
/// repo folder ("datasets--org--x", ".locks", "models--").
std::optional<std::string> RepoIdFromFolderName(std::string_view folder);

/// The suffix of a blob being downloaded: blobs/<etag>.incomplete.
inline constexpr std::string_view kIncompleteSuffix = ".incomplete";
/// blobs/<name> is a partial download.
bool IsPartialBlobName(std::string_view name);

/// Where one repo's pieces live in the store at `store`:
///   <store>/models--org--name/{blobs/<etag>, snapshots/<commit>/<path> -> ../../blobs/<etag>,
///   refs/<revision>}, <store>/.locks/models--org--name/<etag>.lock, and berth's own
///   <store>/models--org--name/.berth/<commit>.json (see SnapshotRecord).
class HfCachePaths {
 public:
  HfCachePaths(std::string_view store, std::string_view repo_id);

  const std::string& repo_dir() const { return repo_dir_; }
  std::string BlobsDir() const { return repo_dir_ + "/blobs"; }
  std::string BlobPath(std::string_view etag) const;
  /// The blob while it downloads.
  std::string IncompletePath(std::string_view etag) const;
  std::string SnapshotsDir() const { return repo_dir_ + "/snapshots"; }
  std::string SnapshotDir(std::string_view commit) const;
  std::string RefsDir() const { return repo_dir_ + "/refs"; }
  std::string RefPath(std::string_view revision) const;
  std::string RecordsDir() const { return repo_dir_ + "/.berth"; }
  std::string RecordPath(std::string_view commit) const;
  const std::string& lock_dir() const { return lock_dir_; }
  std::string LockPath(std::string_view etag) const;

 private:
  std::string repo_dir_, lock_dir_;
};

/// The most berth reads of a ref (a commit and maybe a newline) and of its own snapshot record
/// (a listing of many thousand files); a bigger file there is not one it wrote.
inline constexpr uint64_t kMaxRefFileBytes = 1024;
inline constexpr uint64_t kMaxRecordFileBytes = uint64_t{64} << 20;

/// <store>/models--org--name/snapshots/<commit>: what a model server is pointed at.
std::string SnapshotPath(std::string_view store, std::string_view repo_id, std::string_view commit);

/// Whether `path` points into a repo's snapshots/ folder (a model path in a server's argv).
bool IsSnapshotPath(std::string_view path);

/// The target of the symlink snapshots/<commit>/<path>: "../../blobs/<etag>", one more "../"
/// per folder level of `path`.
std::string SnapshotLinkTarget(std::string_view path, std::string_view etag);

// ---- berth's snapshot record -------------------------------------------------------------

/// One file berth verified: its path in the snapshot, its size and its blob (the etag: 64 hex
/// for an LFS file's sha256, 40 hex for a git blob id).
struct RecordedFile {
  std::string path;
  uint64_t size = 0;
  std::string blob;

  bool is_lfs() const { return blob.size() == 64; }
  bool operator==(const RecordedFile&) const = default;
};

/// <repo>/.berth/<commit>.json: the files of a snapshot berth downloaded and verified, so that a
/// no-op run only stats them. Written when the snapshot is published, read by the store scan
/// (completeness) and by `berth verify` (what to re-hash).
struct SnapshotRecord {
  static constexpr int kFormatVersion = 1;

  std::string repo_id;  // may be empty in a record read back (older writers)
  std::string commit;   // 40 hex
  std::vector<RecordedFile> files;
  /// As written: the sum of the files' sizes. A record read back without it has the sum.
  uint64_t bytes_total = 0;

  /// The record's file: {"format_version":1,"repo_id","commit","files":[{"path","size",
  /// "blob"}],"bytes_total"}, indented by one, ending in a newline.
  std::string ToJson() const;
  /// Reads a record back; never throws. InvalidArgument when the text is not JSON, the
  /// format_version is not 1, the commit is not a commit, a path fails IsSafeRepoPath, a size is
  /// not a non-negative integer of at most kMaxRepoFileBytes, or a blob fails IsBlobName.
  static Result<SnapshotRecord> FromJson(std::string_view text);
};

/// The sum of the sizes of `files`.
uint64_t TotalBytes(const std::vector<RecordedFile>& files);

// ---- The include/exclude filter ----------------------------------------------------------

/// Whether a repo file at `path` is downloaded, as huggingface_hub's filter_repo_objects: kept
/// if it matches any include (or there are none) and no exclude. Patterns are fnmatch globs
/// where '*' also crosses '/'; a pattern ending in '/' matches everything below that folder.
/// The planned size and the download list both use this, so they cannot disagree.
bool FileWanted(const std::string& path, const std::vector<std::string>& include,
                const std::vector<std::string>& exclude);

// ---- The default store -------------------------------------------------------------------

/// Looks up an environment variable: its value, or nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

/// The store berth uses when the manifest names none, by huggingface_hub's rules:
/// $HF_HUB_CACHE, else $HF_HOME/hub, else $HOME/.cache/huggingface/hub ("/root" when HOME is
/// unset). Empty variables count as unset.
std::string DefaultStorePath(const EnvLookup& getenv);
/// The same, from this process's environment.
std::string DefaultStorePath();

}  // namespace berth
