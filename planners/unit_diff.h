// How the unit berth wants differs from the one on disk, and whether that needs a restart. Pure.
#pragma once

#include <string>

namespace berth {

/// How the wanted unit differs from the one on disk.
struct UnitDiff {
  bool changed = false;          // any difference in the body
  bool needs_restart = false;    // a difference a running process would not see otherwise
  bool only_model_path = false;  // the only restart-worthy change is the model snapshot path
  std::string detail;            // "ExecStart changed: --port 8000 → 8001"
};
/// Compares two unit files section by section; comments and cosmetic keys (Description,
/// Documentation) never need a restart.
UnitDiff DiffUnits(const std::string& old_content, const std::string& new_content);

}  // namespace berth
