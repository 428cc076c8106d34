#include "providers/hub/hub_api.h"

#include "core/hf_cache.h"

#include <algorithm>
#include <set>

#include "providers/hub/hub_parse.h"

namespace berth {

Status CheckRepoPath(const std::string& path) {
  if (!IsSafeRepoPath(path))
    return Status::InvalidArgument("the Hub listed an unsafe file path '" + path.substr(0, 200) +
                                   "'; refusing to write outside the snapshot");
  return Status::Ok();
}

namespace {
/// Pages of 1000 files: 10 million files, far more than any model repo.
constexpr int kMaxTreePages = 10000;
/// A repo larger than 2^60 bytes (1 EiB) is not a model berth can store.
constexpr uint64_t kMaxRepoBytes = uint64_t{1} << 60;

/// The cursor= value of a page URL's query, "" when it has none.
std::string CursorOf(const std::string& url) {
  size_t q = url.find('?');
  if (q == std::string::npos) return "";
  for (size_t pos = q + 1; pos < url.size();) {
    size_t amp = url.find('&', pos);
    if (amp == std::string::npos) amp = url.size();
    if (url.compare(pos, 7, "cursor=") == 0) return url.substr(pos + 7, amp - pos - 7);
    pos = amp + 1;
  }
  return "";
}
}  // namespace

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
  Result<std::string> commit = ParseRevisionInfo(info->body);
  if (!commit.ok())
    return Status::Unavailable(what + ": " + commit.status().message() +
                               "; nothing was written (is HF_ENDPOINT a Hugging Face Hub?)");
  snap.commit = *commit;

  std::string url =
      e + "/api/models/" + repo_id + "/tree/" + snap.commit + "?recursive=true&expand=false";
  std::string list_what = "listing " + repo_id + "@" + snap.commit.substr(0, 7);
  std::set<std::string> fetched;  // every page URL asked: a Link back to one is a loop
  std::set<std::string> cursors;  // and every cursor: the same cursor again is one too
  uint64_t total = 0;
  for (int page = 0; !url.empty(); ++page) {
    if (page >= kMaxTreePages)
      return Status::Unavailable(list_what + ": more than " + std::to_string(kMaxTreePages) +
                                 " pages; nothing was written");
    std::string cursor = CursorOf(url);
    if (!fetched.insert(url).second || (!cursor.empty() && !cursors.insert(cursor).second))
      return Status::Unavailable(list_what + ": the Hub's Link pagination loops (page " +
                                 std::to_string(page + 1) + " is " + url.substr(0, 200) +
                                 ", fetched before); nothing was written");
    auto r = http.DoWithRetry("GET", url, list_what, kMaxTreePageBytes);
    if (!r.ok()) return r.status();
    if (r->status != 200) return HubError(*r, list_what, !http.options().token.empty());
    size_t first = snap.files.size();
    Status parsed = ParseTreePage(r->body, &snap.files);
    if (!parsed.ok())
      return Status::Unavailable(list_what + ": " + parsed.message() +
                                 (parsed.message().find("nothing was written") == std::string::npos
                                      ? "; nothing was written"
                                      : ""));
    for (size_t i = first; i < snap.files.size(); ++i) {
      total += snap.files[i].size;  // each at most 2^50: no overflow before the check
      if (total > kMaxRepoBytes)
        return Status::Unavailable(list_what + ": the files add up to more than 2^60 bytes; " +
                                   "nothing was written");
    }
    std::string next = ParseLinkNext(r->Header("link"));
    url = next.empty() ? "" : ResolveLocation(url, next);
    if (!next.empty() && url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
      return Status::Unavailable(list_what + ": the Hub's next page link '" + next.substr(0, 200) +
                                 "' is not an http or https URL; nothing was written");
  }
  std::sort(snap.files.begin(), snap.files.end(),
            [](const HubFileEntry& a, const HubFileEntry& b) { return a.path < b.path; });
  return snap;
}

}  // namespace berth
