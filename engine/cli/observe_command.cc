#include "core/observed_json.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/cli/live_host.h"
#include "engine/output/observed_text.h"
#include "engine/state/state.h"

namespace berth {

int RunObserve(const std::string& manifest_path, const std::string& format,
               const HostAccess& access, std::ostream& out, std::ostream& err) {
  Desired desired;
  if (!manifest_path.empty() && !LoadManifestOrExplain(manifest_path, &desired, err))
    return kExitError;
  // Observing works without systemd (a GPU box without it, a container): units are then unknown.
  LiveHost host(access);
  auto seams = host.Connect(desired);
  if (!seams.ok()) {
    err << "berth observe: " << seams.status().message() << "\n";
    return kExitError;
  }
  StateDir dir(access.state_dir.empty() ? DefaultStateDir() : access.state_dir);
  auto state = dir.Load();
  if (!state.ok()) {
    err << "berth observe: " << state.status().message() << "\n";
    return kExitError;
  }
  auto o = seams->observer->Observe(desired);
  if (!o.ok()) {
    err << "berth observe: " << o.status().message() << "\n";
    return kExitError;
  }
  // The same berth state a plan on this host sees, so a plan made from this file agrees.
  std::string in_progress;
  o->state = ObservedState(*state, dir, /*lock_held=*/false, &in_progress);
  if (!in_progress.empty()) o->warnings.push_back("an apply is running now (" + in_progress + ")");
  out << (format == "json" ? ObservedToJson(*o) : ObservedToText(*o));
  return kExitOk;
}

}  // namespace berth
