#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/observe/live_observer.h"
#include "providers/hub/cache_layout.h"
#include "providers/hub/hub_api.h"
#include "providers/hub/pull.h"

namespace berth {

int RunVerify(const std::string& source, const std::string& store_arg, std::ostream& out,
              std::ostream& err) {
  std::string repo, revision;
  if (!ParseSource(source, &repo, &revision, err)) return kExitError;
  std::string store = store_arg.empty() ? DefaultStorePath() : store_arg;
  CacheLayout layout(store, repo);
  std::string commit = revision;
  if (commit.size() != 40) {
    std::ifstream ref(layout.repo_dir() + "/refs/" + revision);
    std::getline(ref, commit);
  }
  RepoSnapshot listing;
  listing.repo_id = repo;
  listing.commit = commit;
  std::vector<HubFileEntry> wanted;
  std::ifstream rec(layout.RecordPath(commit));
  if (rec) {
    try {
      auto j = nlohmann::json::parse(rec);
      for (const auto& f : j.at("files")) {
        HubFileEntry e;
        e.path = f.at("path").get<std::string>();
        e.size = f.at("size").get<uint64_t>();
        std::string blob = f.at("blob").get<std::string>();
        (blob.size() == 64 ? e.lfs_sha256 : e.git_oid) = blob;
        wanted.push_back(e);
      }
    } catch (const std::exception& ex) {
      err << "berth verify: " << layout.RecordPath(commit) << " is damaged (" << ex.what()
          << "); verifying against the Hub instead\n";
      wanted.clear();
    }
  }
  if (wanted.empty()) {
    HubHttp http(HubOptionsFromEnvironment());
    auto snap = ResolveSnapshot(http, repo, commit.empty() ? revision : commit);
    if (!snap.ok()) {
      err << "berth verify: no record of " << repo << "@" << revision << " in " << store
          << " and the Hub could not be asked: " << snap.status().message() << "\n";
      return kExitError;
    }
    listing = *snap;
    commit = snap->commit;
    wanted = snap->files;
  }
  auto report = VerifySnapshot(store, listing, wanted);
  if (!report.ok()) {
    err << "berth verify: " << report.status().message() << "\n";
    return kExitError;
  }
  for (const auto& f : report->corrupt) out << "corrupt  " << f << "\n";
  for (const auto& f : report->missing) out << "missing  " << f << "\n";
  for (const auto& f : report->extra) out << "extra    " << f << "\n";
  out << repo << "@" << commit.substr(0, 7) << ": " << report->ok.size() << " files verified, "
      << report->corrupt.size() << " corrupt, " << report->missing.size() << " missing, "
      << report->extra.size() << " extra\n";
  bool bad = !report->corrupt.empty() || !report->missing.empty();
  if (bad) out << "run berth pull " << source << " to fetch what is missing or corrupt\n";
  return bad ? kExitError : kExitOk;
}

int RunVerifyManifest(const std::string& manifest_path, const std::string& model,
                      const std::string& store_arg, std::ostream& out, std::ostream& err) {
  Desired desired;
  if (!LoadManifestOrExplain(manifest_path, &desired, err)) return kExitError;
  if (!model.empty() && !desired.models.count(model)) {
    err << "berth verify: no model '" << model << "' in " << manifest_path << "\n";
    return kExitError;
  }
  std::string store = !store_arg.empty()            ? store_arg
                      : !desired.host.store.empty() ? desired.host.store
                                                    : DefaultStorePath();
  int rc = kExitOk;
  for (const auto& [name, m] : desired.models) {
    if (!model.empty() && name != model) continue;
    out << "model/" << name << ": ";
    if (RunVerify("hf://" + m.repo_id + "@" + m.revision, store, out, err) != kExitOk)
      rc = kExitError;
  }
  return rc;
}

}  // namespace berth
