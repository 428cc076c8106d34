#include "core/hf_cache.h"

#include <fnmatch.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace berth {
namespace {

constexpr std::string_view kScheme = "hf://";
constexpr std::string_view kModelsPrefix = "models--";

// ASCII only, whatever the locale.
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsLowerHex(std::string_view s) {
  for (char c : s)
    if (!IsDigit(c) && !(c >= 'a' && c <= 'f')) return false;
  return true;
}

// The reason `part` (an org or a name) is not valid, "" when it is.
std::string HubWordProblem(std::string_view part, const char* what) {
  std::string w = what;
  if (part.empty()) return "the " + w + " is empty";
  if (part.size() > 96) return "the " + w + " is longer than 96 characters";
  if (!IsAlnum(part[0])) return "the " + w + " must start with a letter or digit";
  for (char c : part)
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-')
      return "the " + w + " may hold only letters, digits, '.', '_' and '-'";
  if (part.find("--") != std::string_view::npos) return "the " + w + " must not contain \"--\"";
  if (part.find("..") != std::string_view::npos) return "the " + w + " must not contain \"..\"";
  return "";
}

bool GlobMatches(const std::string& pattern, const std::string& path) {
  // A folder pattern ("tokenizer/") means everything below it.
  std::string p = !pattern.empty() && pattern.back() == '/' ? pattern + "*" : pattern;
  return fnmatch(p.c_str(), path.c_str(), 0) == 0;
}

}  // namespace

bool IsCommit(std::string_view revision) { return revision.size() == 40 && IsLowerHex(revision); }

bool IsRevision(std::string_view revision) {
  if (revision.empty() || revision.size() > 255 || !IsAlnum(revision[0])) return false;
  if (revision.find("..") != std::string_view::npos) return false;
  for (char c : revision) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '/' && c != '+' && c != '-') return false;
  }
  return true;
}

bool IsSnapshotRelativePath(std::string_view path) {
  if (path.empty() || path[0] == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (path.substr(start, end - start) == "..") return false;
    start = end + 1;
  }
  return true;
}

bool IsSafeRepoPath(std::string_view path) {
  if (path.empty() || path.size() > 4096 || path[0] == '/') return false;
  for (char c : path)
    if (c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return false;
    start = end + 1;
  }
  return true;
}

bool IsSha256Name(std::string_view name) { return name.size() == 64 && IsLowerHex(name); }
bool IsGitSha1Name(std::string_view name) { return name.size() == 40 && IsLowerHex(name); }
bool IsBlobName(std::string_view name) { return IsSha256Name(name) || IsGitSha1Name(name); }

Result<HfSource> ParseHfSource(std::string_view source) {
  auto bad = [&](const std::string& why) {
    // Appended, not "'" + std::string(source): g++ 12 -O3 warns falsely (-Wrestrict, GCC bug
    // 105329) on inserting a one-character literal.
    std::string text = "'";
    text.append(source).append("' is not a model source: ").append(why);
    return Status::InvalidArgument(text + "; write hf://org/name or hf://org/name@revision");
  };
  if (source.substr(0, kScheme.size()) != kScheme) return bad("it does not start with hf://");
  std::string_view rest = source.substr(kScheme.size());
  HfSource out;
  if (size_t at = rest.find('@'); at != std::string_view::npos) {
    out.revision = std::string(rest.substr(at + 1));
    out.revision_given = true;
    rest = rest.substr(0, at);
    if (!IsRevision(out.revision))
      return bad("the revision after '@' must be a branch, a tag or a 40-hex commit");
  }
  size_t slash = rest.find('/');
  if (slash == std::string_view::npos) return bad("it names no org (hf://org/name)");
  std::string_view org = rest.substr(0, slash);
  std::string_view name = rest.substr(slash + 1);
  if (name.find('/') != std::string_view::npos) return bad("it has more than org/name");
  for (auto [part, what] : {std::pair{org, "org"}, std::pair{name, "name"}})
    if (std::string problem = HubWordProblem(part, what); !problem.empty()) return bad(problem);
  out.repo_id = std::string(rest);
  return out;
}

std::string RepoFolderName(std::string_view repo_id) {
  std::string folder(kModelsPrefix);
  for (char c : repo_id) {
    if (c == '/') {
      folder += "--";
    } else {
      folder += c;
    }
  }
  return folder;
}

std::optional<std::string> RepoIdFromFolderName(std::string_view folder) {
  if (folder.substr(0, kModelsPrefix.size()) != kModelsPrefix ||
      folder.size() == kModelsPrefix.size())
    return std::nullopt;
  // As huggingface_hub's scan_cache_dir: every "--" of the rest is a "/".
  std::string id(folder.substr(kModelsPrefix.size()));
  // replace(pos, 2, 1, '/'), not replace(pos, 2, "/"): g++ 12 -O3 warns falsely (-Wrestrict,
  // GCC bug 105329) on replacing with a one-character literal.
  for (size_t pos = 0; (pos = id.find("--", pos)) != std::string::npos;) id.replace(pos, 2, 1, '/');
  return id;
}

bool IsPartialBlobName(std::string_view name) {
  return name.size() >= kIncompleteSuffix.size() &&
         name.substr(name.size() - kIncompleteSuffix.size()) == kIncompleteSuffix;
}

HfCachePaths::HfCachePaths(std::string_view store, std::string_view repo_id) {
  std::string folder = RepoFolderName(repo_id);
  repo_dir_ = std::string(store) + "/" + folder;
  lock_dir_ = std::string(store) + "/.locks/" + folder;
}

std::string HfCachePaths::BlobPath(std::string_view etag) const {
  return BlobsDir() + "/" + std::string(etag);
}

std::string HfCachePaths::IncompletePath(std::string_view etag) const {
  return BlobPath(etag) + std::string(kIncompleteSuffix);
}

std::string HfCachePaths::SnapshotDir(std::string_view commit) const {
  return SnapshotsDir() + "/" + std::string(commit);
}

std::string HfCachePaths::RefPath(std::string_view revision) const {
  return RefsDir() + "/" + std::string(revision);
}

std::string HfCachePaths::RecordPath(std::string_view commit) const {
  return RecordsDir() + "/" + std::string(commit) + ".json";
}

std::string HfCachePaths::LockPath(std::string_view etag) const {
  return lock_dir_ + "/" + std::string(etag) + ".lock";
}

std::string SnapshotPath(std::string_view store, std::string_view repo_id,
                         std::string_view commit) {
  return HfCachePaths(store, repo_id).SnapshotDir(commit);
}

bool IsSnapshotPath(std::string_view path) {
  return path.find("/snapshots/") != std::string_view::npos;
}

std::string SnapshotLinkTarget(std::string_view path, std::string_view etag) {
  std::string target = "../../blobs/" + std::string(etag);
  for (char c : path)
    if (c == '/') target = "../" + target;
  return target;
}

uint64_t TotalBytes(const std::vector<RecordedFile>& files) {
  uint64_t total = 0;
  for (const RecordedFile& f : files) total += f.size;
  return total;
}

std::string SnapshotRecord::ToJson() const {
  nlohmann::ordered_json record;
  record["format_version"] = kFormatVersion;
  record["repo_id"] = repo_id;
  record["commit"] = commit;
  nlohmann::ordered_json listed = nlohmann::ordered_json::array();
  for (const RecordedFile& f : files)
    listed.push_back({{"path", f.path}, {"size", f.size}, {"blob", f.blob}});
  record["files"] = std::move(listed);
  record["bytes_total"] = bytes_total;
  return DumpJson(record, 1) + "\n";
}

Result<SnapshotRecord> SnapshotRecord::FromJson(std::string_view text) {
  auto bad = [](const std::string& why) {
    return Status::InvalidArgument("not a berth snapshot record: " + why);
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return bad("not JSON");
  if (!j.is_object()) return bad("not a JSON object");
  SnapshotRecord r;
  if (auto v = j.find("format_version"); v != j.end() && *v != kFormatVersion)
    return bad("format_version " + v->dump() + " is not supported");
  if (auto v = j.find("repo_id"); v != j.end()) {
    if (!v->is_string()) return bad("repo_id is not a string");
    r.repo_id = v->get<std::string>();
  }
  auto commit = j.find("commit");
  if (commit == j.end() || !commit->is_string() || !IsCommit(commit->get<std::string>()))
    return bad("commit is not 40 lowercase hex digits");
  r.commit = commit->get<std::string>();
  auto files = j.find("files");
  if (files == j.end() || !files->is_array()) return bad("files is not a list");
  for (const auto& f : *files) {
    if (!f.is_object()) return bad("a file is not an object");
    auto path = f.find("path"), size = f.find("size"), blob = f.find("blob");
    if (path == f.end() || !path->is_string() || !IsSafeRepoPath(path->get<std::string>()))
      return bad("a file's path is not a plain path relative to the snapshot");
    RecordedFile rf;
    rf.path = path->get<std::string>();
    if (size == f.end() || !size->is_number_unsigned())
      return bad(rf.path + ": size is not a non-negative integer");
    rf.size = size->get<uint64_t>();
    if (rf.size > kMaxRepoFileBytes) return bad(rf.path + ": size is beyond 2^50 bytes");
    if (blob == f.end() || !blob->is_string()) return bad(rf.path + ": no blob");
    rf.blob = blob->get<std::string>();
    if (!IsBlobName(rf.blob)) return bad(rf.path + ": blob is not 40 or 64 lowercase hex digits");
    r.files.push_back(std::move(rf));
  }
  if (auto v = j.find("bytes_total"); v != j.end()) {
    if (!v->is_number_unsigned()) return bad("bytes_total is not a non-negative integer");
    r.bytes_total = v->get<uint64_t>();
  } else {
    r.bytes_total = TotalBytes(r.files);
  }
  return r;
}

bool FileWanted(const std::string& path, const std::vector<std::string>& include,
                const std::vector<std::string>& exclude) {
  bool included = include.empty();
  for (const auto& p : include) included = included || GlobMatches(p, path);
  if (!included) return false;
  for (const auto& p : exclude)
    if (GlobMatches(p, path)) return false;
  return true;
}

std::string DefaultStorePath(const EnvLookup& getenv) {
  auto set = [&](const char* name) -> const char* {
    const char* v = getenv(name);
    return v && *v ? v : nullptr;
  };
  if (const char* c = set("HF_HUB_CACHE")) return c;
  if (const char* h = set("HF_HOME")) return std::string(h) + "/hub";
  const char* home = set("HOME");
  return std::string(home ? home : "/root") + "/.cache/huggingface/hub";
}

std::string DefaultStorePath() {
  return DefaultStorePath([](const char* name) { return std::getenv(name); });
}

}  // namespace berth
