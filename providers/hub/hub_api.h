// The Hub's API: a revision to its commit, and the recursive file listing at that commit.
#pragma once

#include <string>

#include "core/status.h"
#include "providers/hub/http.h"
#include "providers/hub/hub_types.h"

namespace berth {

/// GET /api/models/{repo}/revision/{rev} for the commit, then GET /api/models/{repo}/tree/{commit}
/// ?recursive=true, following Link pagination. Files only, sorted by path.
Result<RepoSnapshot> ResolveSnapshot(HubHttp& http, const std::string& repo_id,
                                     const std::string& revision);

/// Rejects repo paths that would escape the snapshot: absolute, "..", empty segments, NUL, "\".
Status CheckRepoPath(const std::string& path);

}  // namespace berth
