// The Hub's answers as data: the revision info, a tree page, the Link header and the /resolve
// metadata headers, parsed by pure functions that never throw and validate every value before
// it can name a path or size anything (the Hub is not trusted). Fuzzed by tests/fuzz.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "providers/hub/hub_types.h"

namespace berth {

/// The commit of GET /api/models/{repo}/revision/{rev}: its "sha", which must be a commit (40
/// lowercase hex). InvalidArgument says what is wrong.
Result<std::string> ParseRevisionInfo(std::string_view body);

/// The files of one page of GET /api/models/{repo}/tree/{commit}, appended to `out`
/// (directories and unknown types skipped). Each file's path must pass IsSafeRepoPath, its size
/// be an integer of at most kMaxRepoFileBytes, an LFS file's lfs.oid a sha256 (64 lowercase
/// hex) and a regular file's oid a git blob sha1 (40). InvalidArgument names the file and the
/// field; `out` is then unchanged.
Status ParseTreePage(std::string_view body, std::vector<HubFileEntry>* out);

/// The URL of `Link: <URL>; rel="next"`, "" when there is none.
std::string ParseLinkNext(std::string_view link);

/// A size header (X-Linked-Size, Content-Length): decimal digits only, at most
/// kMaxRepoFileBytes. InvalidArgument otherwise.
Result<uint64_t> ParseSizeHeader(std::string_view value);

/// An ETag as huggingface_hub normalizes it: without "W/" and the quotes.
std::string NormalizeEtag(std::string_view etag);

}  // namespace berth
