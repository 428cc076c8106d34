#include "providers/hub/hub_api.h"

#include "engine/core/hf_cache.h"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace berth {
namespace {

// Link: <https://...&cursor=xyz>; rel="next"
std::string NextLink(const std::string& link) {
  size_t rel = link.find("rel=\"next\"");
  if (rel == std::string::npos) return "";
  size_t close = link.rfind('>', rel);
  size_t open = link.rfind('<', close);
  if (open == std::string::npos || close == std::string::npos) return "";
  return link.substr(open + 1, close - open - 1);
}

}  // namespace

Status CheckRepoPath(const std::string& path) {
  if (path.empty() || path[0] == '/' || path.find('\\') != std::string::npos ||
      path.find('\0') != std::string::npos)
    return Status::InvalidArgument("the Hub listed an unsafe file path '" + path +
                                   "'; refusing to write outside the snapshot");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    std::string seg =
        path.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (seg.empty() || seg == "." || seg == "..")
      return Status::InvalidArgument("the Hub listed an unsafe file path '" + path +
                                     "'; refusing to write outside the snapshot");
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return Status::Ok();
}

Result<RepoSnapshot> ResolveSnapshot(HubHttp& http, const std::string& repo_id,
                                     const std::string& revision) {
  const std::string& e = http.options().endpoint;
  RepoSnapshot snap;
  snap.repo_id = repo_id;
  snap.revision = revision;
  std::string what = "asking the Hub for " + repo_id + "@" + revision;
  auto info = http.DoWithRetry(
      "GET", e + "/api/models/" + repo_id + "/revision/" + UrlEncode(revision, false), what);
  if (!info.ok()) return info.status();
  if (info->status != 200) return HubError(*info, what, !http.options().token.empty());
  try {
    auto j = nlohmann::json::parse(info->body);
    snap.commit = j.at("sha").get<std::string>();
  } catch (const std::exception& ex) {
    return Status::Unavailable(what + ": unexpected answer (" + ex.what() +
                               "); is HF_ENDPOINT a Hugging Face Hub?");
  }
  if (!IsCommit(snap.commit))
    return Status::Unavailable(what + ": the Hub answered '" + snap.commit.substr(0, 80) +
                               "', which is not a commit (40 hex digits); nothing was written");

  std::string url =
      e + "/api/models/" + repo_id + "/tree/" + snap.commit + "?recursive=true&expand=false";
  std::string list_what = "listing " + repo_id + "@" + snap.commit.substr(0, 7);
  for (int page = 0; !url.empty(); ++page) {
    if (page > 100000) return Status::Unavailable(list_what + ": too many pages");
    auto r = http.DoWithRetry("GET", url, list_what);
    if (!r.ok()) return r.status();
    if (r->status != 200) return HubError(*r, list_what, !http.options().token.empty());
    try {
      for (const auto& item : nlohmann::json::parse(r->body)) {
        if (item.value("type", "") != "file") continue;
        HubFileEntry f;
        f.path = item.at("path").get<std::string>();
        f.size = item.at("size").get<uint64_t>();
        f.git_oid = item.value("oid", "");
        if (item.contains("lfs") && item["lfs"].is_object())
          f.lfs_sha256 = item["lfs"].value("oid", item["lfs"].value("sha256", ""));
        BERTH_RETURN_IF_ERROR(CheckRepoPath(f.path).WithContext(list_what));
        snap.files.push_back(std::move(f));
      }
    } catch (const std::exception& ex) {
      return Status::Unavailable(list_what + ": unexpected answer (" + ex.what() + ")");
    }
    std::string next = NextLink(r->Header("link"));
    url = next.empty() ? "" : ResolveLocation(url, next);
  }
  std::sort(snap.files.begin(), snap.files.end(),
            [](const HubFileEntry& a, const HubFileEntry& b) { return a.path < b.path; });
  return snap;
}

}  // namespace berth
