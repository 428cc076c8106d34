#include "engine/cli/cli_support.h"

#include "core/untrusted_text.h"
#include "engine/cli/commands.h"
#include "manifests/loader.h"

namespace berth {

bool LoadManifestOrExplain(const std::string& path, Desired* desired, std::ostream& err) {
  LoadResult r = LoadManifests(path);
  if (!r.ok()) {
    for (const auto& d : r.diagnostics) err << d.ToString() << "\n";
    err << r.diagnostics.size() << " problem" << (r.diagnostics.size() == 1 ? "" : "s") << " in "
        << EscapeLine(path) << "; nothing was planned or changed\n";
    return false;
  }
  *desired = std::move(r.desired);
  return true;
}

ExitCode ExitCodeOf(Outcome o) {
  if (o == Outcome::kNoChanges || o == Outcome::kApplied) return kExitOk;
  if (o == Outcome::kPlanned) return kExitChanges;
  if (o == Outcome::kBlocked || o == Outcome::kHeld) return kExitBlocked;
  if (o == Outcome::kFailed) return kExitFailed;
  return o == Outcome::kStale ? kExitStale : kExitError;
}

}  // namespace berth
