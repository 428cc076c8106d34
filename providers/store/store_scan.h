// The model store as it is on disk: the Hugging Face cache layout (hf-hub-protocol.md §4),
// read with directory listings, stat and readlink only. Blob contents are never read.
#pragma once

#include <map>
#include <set>
#include <string>

#include "core/observed.h"
#include "core/status.h"
#include "providers/store/store_fs.h"

namespace berth {

/// Scans `store_path` (an HF_HUB_CACHE directory). Per models--{org}--{name} directory
/// (datasets--, spaces--, .locks and other entries are ignored), one ObservedRevision per
/// snapshots/<commit> directory:
/// - refs: the refs/** files whose content is the commit (one trailing newline tolerated);
///   nested refs read "pr/1". A ref that holds no commit (IsCommit) is ignored, and so is a
///   snapshots/ entry whose name is not a commit.
/// - bytes_present: the sizes of the distinct files the snapshot holds (each blob once, however
///   many symlinks point at it; a plain file in the snapshot counts itself).
/// - complete, bytes_total: if berth's record <repo>/.berth/<commit>.json exists, complete means
///   every file it lists is present with the listed size, and bytes_total is its "bytes_total"
///   (or the sum of its sizes); a record SnapshotRecord::FromJson refuses, or one of another
///   commit, makes the revision incomplete, so the download provider verifies it again. Without a
///   record, complete means the snapshot has at least one file and every symlink resolves to an
///   existing blob; bytes_total is then bytes_present, and unknown otherwise.
/// - A commit some ref names but that has no snapshot directory yet (a download just started)
///   is reported too, incomplete with no bytes.
/// - Partial downloads (blobs/*.incomplete) cannot be tied to a file: their bytes (what the file
///   system holds of them, not their sparse size) go to the incomplete revision touched last
///   (a pull makes snapshots/<commit>/ before its first byte, so that is the one downloading)
///   (snapshot directory mtime, or the ref file's for a commit without snapshot); if every revision
///   is complete, to a revision with commit "".
/// Repos are sorted by repo_id, revisions by commit. A missing store is not an error:
/// exists=false, with the space of the nearest existing parent so disk checks still work.
Result<ObservedStore> ScanStore(const std::string& store_path);
Result<ObservedStore> ScanStore(const std::string& store_path, StoreFs& fs);

/// For each repo of `files` (repo_id -> GGUF paths inside its snapshots: the model files of the
/// manifest's llama-server services), reads the metadata and tensor list of each of those files
/// that a complete revision's scan found into its GgufHeader::model (ParseGgufModel): 1 MiB
/// first, then 16 and 64 MiB (kMaxGgufModelBytes) while the list runs past what was read. The
/// files are the Hub's, untrusted: bounded reads, a parse that cannot throw.
void ReadGgufModels(const std::map<std::string, std::set<std::string>>& files, StoreFs& fs,
                    ObservedStore* store);

}  // namespace berth
