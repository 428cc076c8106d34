#include "providers/hub/hub_parse.h"

#include <charconv>
#include <nlohmann/json.hpp>

#include "core/hf_cache.h"
#include "core/json_text.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

/// `s` shortened for a message, so a hostile value cannot flood a log.
/// (Appended, not `"'" + string&&`: g++ 12 at -O3 warns about that with a false -Wrestrict.)
std::string Quote(std::string_view s) {
  std::string out = "'";
  out += Excerpt(s, 80);
  out += '\'';
  return out;
}

std::string Shown(const nlohmann::json& v) {
  return v.is_string() ? Quote(v.get_ref<const std::string&>()) : Quote(DumpJson(v));
}

}  // namespace

Result<std::string> ParseRevisionInfo(std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument("the revision info is not a JSON object");
  auto sha = j.find("sha");
  if (sha == j.end()) return Status::InvalidArgument("the revision info has no \"sha\"");
  if (!sha->is_string() || !IsCommit(sha->get_ref<const std::string&>()))
    return Status::InvalidArgument("the revision info's \"sha\" " + Shown(*sha) +
                                   " is not a commit (40 lowercase hex digits)");
  return sha->get<std::string>();
}

Status ParseTreePage(std::string_view body, std::vector<HubFileEntry>* out) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array())
    return Status::InvalidArgument("the tree page is not a JSON list");
  std::vector<HubFileEntry> page;
  for (const auto& item : j) {
    if (!item.is_object()) return Status::InvalidArgument("a tree entry is not an object");
    auto type = item.find("type");
    if (type == item.end() || !type->is_string() || *type != "file") continue;
    auto path = item.find("path");
    if (path == item.end() || !path->is_string())
      return Status::InvalidArgument("a file of the tree has no path");
    HubFileEntry f;
    f.path = path->get<std::string>();
    if (!IsSafeRepoPath(f.path))
      return Status::InvalidArgument("the Hub listed an unsafe file path " + Quote(f.path) +
                                     "; refusing to write outside the snapshot");
    auto bad = [&](const std::string& field, const nlohmann::json& v, const std::string& why) {
      return Status::InvalidArgument("file " + Quote(f.path) + ": the tree's " + field + " " +
                                     Shown(v) + " " + why + "; nothing was written");
    };
    auto size = item.find("size");
    if (size == item.end() || !size->is_number_unsigned())
      return bad("size", size == item.end() ? nlohmann::json() : *size,
                 "is not a non-negative integer");
    f.size = size->get<uint64_t>();
    if (f.size > kMaxRepoFileBytes) return bad("size", *size, "is beyond 2^50 bytes");
    auto lfs = item.find("lfs");
    if (lfs != item.end() && !lfs->is_null()) {
      if (!lfs->is_object()) return bad("lfs", *lfs, "is not an object");
      auto oid = lfs->find("oid");
      if (oid == lfs->end()) oid = lfs->find("sha256");
      if (oid == lfs->end() || !oid->is_string() ||
          !IsSha256Name(oid->get_ref<const std::string&>()))
        return bad("lfs.oid", oid == lfs->end() ? nlohmann::json() : *oid,
                   "is not a sha256 (64 lowercase hex digits)");
      f.lfs_sha256 = oid->get<std::string>();
      if (auto ls = lfs->find("size");
          ls != lfs->end() && (!ls->is_number_unsigned() || ls->get<uint64_t>() != f.size))
        return bad("lfs.size", *ls, "is not the file's size " + std::to_string(f.size));
    }
    auto oid = item.find("oid");
    if (oid != item.end() && oid->is_string()) f.git_oid = oid->get<std::string>();
    if (!f.is_lfs() && !IsGitSha1Name(f.git_oid))
      return bad("oid", oid == item.end() ? nlohmann::json() : *oid,
                 "is not a git blob sha1 (40 lowercase hex digits)");
    page.push_back(std::move(f));
  }
  for (auto& f : page) out->push_back(std::move(f));
  return Status::Ok();
}

std::string ParseLinkNext(std::string_view link) {
  // Link: <https://...&cursor=xyz>; rel="next"[, <...>; rel="other"]
  size_t rel = link.find("rel=\"next\"");
  if (rel == std::string_view::npos) return "";
  size_t close = link.rfind('>', rel);
  if (close == std::string_view::npos) return "";
  size_t open = link.rfind('<', close);
  if (open == std::string_view::npos) return "";
  return std::string(link.substr(open + 1, close - open - 1));
}

Result<uint64_t> ParseSizeHeader(std::string_view value) {
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size())
    return Status::InvalidArgument("size " + Quote(value) + " is not a number");
  if (n > kMaxRepoFileBytes)
    return Status::InvalidArgument("size " + Quote(value) + " is beyond 2^50 bytes");
  return n;
}

std::string NormalizeEtag(std::string_view etag) {
  if (etag.substr(0, 2) == "W/") etag.remove_prefix(2);
  while (!etag.empty() && etag.front() == '"') etag.remove_prefix(1);
  while (!etag.empty() && etag.back() == '"') etag.remove_suffix(1);
  return std::string(etag);
}

}  // namespace berth
