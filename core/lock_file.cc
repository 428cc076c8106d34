#include "core/lock_file.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/hf_cache.h"
#include "core/json_text.h"

namespace berth {

namespace fs = std::filesystem;
using nlohmann::json;

std::string LockFilePath(const std::string& manifest_path) {
  std::error_code ec;
  if (fs::is_directory(manifest_path, ec))
    return (fs::path(manifest_path) / kLockFileName).string();
  fs::path parent = fs::path(manifest_path).parent_path();
  return parent.empty() ? std::string(kLockFileName) : (parent / kLockFileName).string();
}

namespace {

Status Bad(const std::string& where, const std::string& what) {
  return Status::InvalidArgument(where + ": " + what);
}

Result<std::string> Text(const json& entry, const std::string& where, const char* key) {
  auto it = entry.find(key);
  if (it == entry.end()) return Bad(where, "missing '" + std::string(key) + "'");
  if (!it->is_string()) return Bad(where + "." + key, "must be a string");
  std::string v = it->get<std::string>();
  if (v.empty()) return Bad(where + "." + key, "must not be empty");
  return v;
}

Result<LockEntry> ParseEntry(const std::string& name, const json& j) {
  std::string where = "models." + name;
  if (!j.is_object()) return Bad(where, "must be an object with repo, revision, commit, locked_at");
  for (const auto& [key, value] : j.items())
    if (key != "repo" && key != "revision" && key != "commit" && key != "locked_at")
      return Bad(where, "unknown key '" + key + "' (expected repo, revision, commit, locked_at)");
  LockEntry e;
  auto repo = Text(j, where, "repo");
  if (!repo.ok()) return repo.status();
  if (repo->find('/') == std::string::npos)
    return Bad(where + ".repo", "'" + *repo + "' is not an org/name repo id");
  auto revision = Text(j, where, "revision");
  if (!revision.ok()) return revision.status();
  if (!IsRevision(*revision))
    return Bad(where + ".revision", "'" + *revision + "' is not a branch or tag name");
  auto commit = Text(j, where, "commit");
  if (!commit.ok()) return commit.status();
  if (!IsCommit(*commit)) return Bad(where + ".commit", "'" + *commit + "' is not a 40-hex commit");
  auto locked_at = Text(j, where, "locked_at");
  if (!locked_at.ok()) return locked_at.status();
  e.repo_id = *repo;
  e.revision = *revision;
  e.commit = *commit;
  e.locked_at = *locked_at;
  return e;
}

}  // namespace

Result<std::map<std::string, LockEntry>> ParseLockFile(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("not valid JSON");
  if (!j.is_object()) return Status::InvalidArgument("must be a JSON object");
  for (const auto& [key, value] : j.items())
    if (key != "format_version" && key != "models")
      return Status::InvalidArgument("unknown key '" + key +
                                     "' (expected format_version and models)");
  auto version = j.find("format_version");
  if (version == j.end() || !version->is_number_integer() ||
      version->get<int64_t>() != kLockFormatVersion)
    return Status::InvalidArgument("format_version must be " + std::to_string(kLockFormatVersion));
  auto models = j.find("models");
  if (models == j.end() || !models->is_object())
    return Status::InvalidArgument("'models' must be an object of model name -> entry");
  std::map<std::string, LockEntry> entries;
  for (const auto& [name, value] : models->items()) {
    auto e = ParseEntry(name, value);
    if (!e.ok()) return e.status();
    entries.emplace(name, std::move(e).value());
  }
  return entries;
}

std::string SerializeLockFile(const std::map<std::string, LockEntry>& entries) {
  json models = json::object();
  for (const auto& [name, e] : entries)
    models[name] = {{"repo", e.repo_id},
                    {"revision", e.revision},
                    {"commit", e.commit},
                    {"locked_at", e.locked_at}};
  json j = {{"format_version", kLockFormatVersion}, {"models", models}};
  return DumpJson(j, 2) + "\n";
}

}  // namespace berth
