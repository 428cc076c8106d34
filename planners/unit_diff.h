// How the unit berth wants differs from the one on disk, and whether that needs a restart. Pure.
#pragma once

#include <string>
#include <vector>

namespace berth {

/// What a running service needs once one setting of its unit file changed, as NixOS's
/// switch-to-configuration decides it: most settings reach the process only when it starts
/// (ExecStart=, Environment=, User=, WorkingDirectory=, resource and sandbox settings), some are
/// read by systemd alone and take effect at the daemon-reload (Restart=, RestartSec=,
/// Timeout*Sec=, StartLimit*=, Description=, the [Install] section). A key berth does not know
/// needs a restart: it fails safe.
enum class UnitKeyEffect {
  kRestart,  // the process must start again to run with it
  kReload,   // a daemon-reload is enough: systemd reads it, the process never does
};
/// The effect of a change to `section_key` ("Service.RestartSec", as ParseUnitEntries names it).
UnitKeyEffect KeyEffect(const std::string& section_key);

/// How the wanted unit differs from the one on disk.
struct UnitDiff {
  bool changed = false;          // any difference in the body
  bool needs_restart = false;    // a difference a running process would not see otherwise
  bool only_model_path = false;  // the only restart-worthy change is the model snapshot path
  bool install_changed = false;  // [Install] differs: an enabled unit's links must be made again
  std::vector<std::string> restart_keys;  // the changed keys that need a restart ("ExecStart")
  std::vector<std::string> reload_keys;   // the changed keys a daemon-reload is enough for
  std::string detail;                     // "ExecStart changed: --port 8000 → 8001"
};
/// Compares two unit files section by section, key by key (KeyEffect); comments and layout
/// never need a restart.
UnitDiff DiffUnits(const std::string& old_content, const std::string& new_content);

/// What a running process of the unit in `content` depends on: a digest of the settings whose
/// change needs a restart (KeyEffect kRestart), in a stable order, as "restart-keys:<sha256>".
/// Two unit files with the same digest run the same process; berth records it for each service
/// it starts (State::started), so a later change of a reload-only setting is not mistaken for a
/// process started from an older unit.
std::string RestartDigest(const std::string& content);

}  // namespace berth
