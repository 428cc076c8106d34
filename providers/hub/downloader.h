// The blob downloader: many files over a bounded set of connections (libcurl multi). Big files
// go in ranged chunks written in place (pwrite) to blobs/<etag>.incomplete; a chunk map beside
// it makes a killed download resume with only the missing chunks. Every byte is verified
// (sha256 or git sha1) before the blob gets its final name. Memory stays bounded whatever the
// model size: curl's buffers, nothing more.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "providers/hub/cache_layout.h"
#include "providers/hub/http.h"

namespace berth {

struct DownloadStats {
  uint64_t bytes_fetched = 0;  // over the network in this run
  uint64_t bytes_resumed = 0;  // already on disk from an earlier, interrupted run
  uint64_t bytes_reused = 0;   // blobs already complete and verified (maybe another revision's)
  int blobs_replaced = 0;      // blobs of the right size and wrong bytes, fetched again
  int files_fetched = 0;
  int retries = 0;
};

/// Downloads every blob of `files` missing from `layout` (repo `repo_id` at `commit`) and
/// verifies it. On failure the partial files stay for the next run to resume.
Status DownloadBlobs(HubHttp& http, const CacheLayout& layout, const std::string& repo_id,
                     const std::string& commit, const std::vector<HubFileEntry>& files,
                     DownloadStats* stats);

}  // namespace berth
