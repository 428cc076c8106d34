#include <unistd.h>

#include "core/hf_cache.h"
#include "core/units.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/output/progress.h"
#include "providers/hub/pull.h"

namespace berth {

int RunPull(const PullCommand& cmd, std::ostream& out, std::ostream& err) {
  auto src = ParseHfSource(cmd.source);
  if (!src.ok()) {
    err << "berth pull: " << src.status().message() << "\n";
    return kExitError;
  }
  PullRequest req;
  req.repo_id = src->repo_id;
  req.revision = src->revision;
  req.store = cmd.store.empty() ? DefaultStorePath() : cmd.store;
  req.include = cmd.include;
  req.exclude = cmd.exclude;
  HubOptions hub = HubOptionsFromEnvironment();
  if (cmd.connections > 0) hub.connections = cmd.connections;
  ProgressPrinter printer(out, ::isatty(1) == 1);
  hub.on_progress = [&printer](const PullProgress& p) { printer.Update(p); };
  auto r = PullModel(req, hub);
  if (!r.ok()) {
    err << "berth pull: " << r.status().message() << "\n";
    return kExitError;
  }
  PullProgress p;
  p.repo_id = req.repo_id;
  p.bytes_done = p.bytes_total = r->bytes_total;
  p.bytes_fetched = r->stats.bytes_fetched;
  p.files_done = p.files_total = static_cast<int>(r->files.size());
  p.seconds = r->seconds;
  printer.Done(p);
  out << req.repo_id << "@" << r->snapshot.commit << " in " << req.store << ": " << r->files.size()
      << " files, " << FormatBytes(r->bytes_total) << " (" << FormatBytes(r->stats.bytes_fetched)
      << " fetched, " << FormatBytes(r->stats.bytes_resumed) << " resumed, "
      << FormatBytes(r->stats.bytes_reused) << " already there and re-hashed";
  if (r->stats.blobs_replaced > 0)
    out << "; " << r->stats.blobs_replaced << " blob" << (r->stats.blobs_replaced == 1 ? "" : "s")
        << " of the right size but wrong bytes fetched again";
  out << "), verified\n";
  return kExitOk;
}

}  // namespace berth
