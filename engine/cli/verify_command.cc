#include <cctype>
#include <string_view>

#include "core/hf_cache.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "providers/hub/cache_layout.h"
#include "providers/hub/hub_api.h"
#include "providers/hub/pull.h"

namespace berth {
namespace {

// `arg` as a shell reads it back: as is when it holds only safe characters, else in single
// quotes (a quote inside as '\'').
std::string ShellWord(const std::string& arg) {
  bool plain = !arg.empty();
  for (char c : arg)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) ||
                      std::string_view("@%+=:,./_-").find(c) != std::string_view::npos);
  if (plain) return arg;
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The pull that fetches what `verify` found missing or corrupt, into the same store and with
// the same files as the manifest's model: without --store, berth pull would fill the default
// store and leave this one as it is.
std::string PullAdvice(const std::string& source, const std::string& store,
                       const std::vector<std::string>& include,
                       const std::vector<std::string>& exclude) {
  std::string cmd = "berth pull " + ShellWord(source) + " --store " + ShellWord(store);
  for (const auto& g : include) cmd += " --include " + ShellWord(g);
  for (const auto& g : exclude) cmd += " --exclude " + ShellWord(g);
  return cmd;
}

int VerifyOne(const std::string& source, const std::string& store_arg,
              const std::vector<std::string>& include, const std::vector<std::string>& exclude,
              std::ostream& out, std::ostream& err) {
  auto src = ParseHfSource(source);
  if (!src.ok()) {
    err << "berth verify: " << src.status().message() << "\n";
    return kExitError;
  }
  const std::string& repo = src->repo_id;
  const std::string& revision = src->revision;
  std::string store = store_arg.empty() ? DefaultStorePath() : store_arg;
  CacheLayout layout(store, repo);
  auto ref = layout.ReadRef(revision);
  std::string commit = ref.ok() ? *ref : "";
  RepoSnapshot listing;
  listing.repo_id = repo;
  listing.commit = commit;
  std::vector<HubFileEntry> wanted;
  if (!commit.empty()) {
    auto record = layout.ReadRecord(commit);
    if (record.ok()) {
      for (const RecordedFile& f : record->files) wanted.push_back(HubFileOf(f));
    } else if (record.status().code() != Status::Code::kNotFound) {
      err << "berth verify: " << record.status().message() << "; verifying against the Hub "
          << "instead\n";
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
    wanted.clear();
    for (const auto& f : snap->files)  // the files the manifest's model asks for, as pull keeps
      if (FileWanted(f.path, include, exclude)) wanted.push_back(f);
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
  if (bad)
    out << "run " << PullAdvice(source, store, include, exclude)
        << " to fetch what is missing or corrupt\n";
  return bad ? kExitError : kExitOk;
}

}  // namespace

int RunVerify(const std::string& source, const std::string& store, std::ostream& out,
              std::ostream& err) {
  return VerifyOne(source, store, {}, {}, out, err);
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
    // A pinned model is verified at the commit berth.lock pins, not where the branch is now.
    const LockEntry* pin = desired.PinFor(m);
    std::string revision = pin ? pin->commit : m.revision;
    if (VerifyOne("hf://" + m.repo_id + "@" + revision, store, m.include, m.exclude, out, err) !=
        kExitOk)
      rc = kExitError;
  }
  return rc;
}

}  // namespace berth
