#include "providers/systemd/observe_units.h"

#include <algorithm>

#include "core/hash.h"
#include "core/unit_marker.h"
#include "core/untrusted_text.h"

namespace berth {

Result<std::vector<ObservedUnit>> ObserveUnits(SystemdManager& systemd, const UnitFileStore& files,
                                               std::vector<std::string> names) {
  auto berth_units = files.ListBerthUnits();
  if (!berth_units.ok()) return berth_units.status();
  for (const auto& u : *berth_units)
    if (std::find(names.begin(), names.end(), u) == names.end()) names.push_back(u);
  std::sort(names.begin(), names.end());
  auto props = systemd.GetUnits(names);
  if (!props.ok()) return props.status();
  std::vector<ObservedUnit> out;
  for (const UnitProperties& p : *props) {
    ObservedUnit u;
    u.name = p.name;
    u.load_state = p.load_state;
    u.active_state = p.active_state;
    u.sub_state = p.sub_state;
    u.fragment_path = p.fragment_path;
    u.main_pid = static_cast<int>(p.main_pid);
    u.need_daemon_reload = p.need_daemon_reload;
    u.drop_in_paths = p.drop_in_paths;
    u.unit_file_state = p.unit_file_state;
    u.invocation_id = p.invocation_id;
    u.active_enter_usec = p.active_enter_usec;
    u.timeout_stop_usec = p.timeout_stop_usec;
    u.last_start_ms = LastStartMs(p.inactive_exit_monotonic_usec, p.active_enter_monotonic_usec);
    u.n_restarts = p.n_restarts;
    u.result = p.result;
    u.exec_main_status = p.exec_main_status;
    auto content = files.Read(p.name);
    if (!content.ok()) return content.status();
    if (content->has_value()) {
      const std::string& text = **content;
      u.content_hash = Sha256Hex(text);
      if (u.fragment_path.empty()) u.fragment_path = files.PathOf(p.name);
      if (IsBerthUnit(text)) {
        u.managed = true;
        u.spec_hash = UnitSpecHash(text);
        u.lineage = UnitLineage(text);
        u.content = text;
      } else if (text.size() > kMaxForeignUnitBytes) {
        u.content_note =
            "the file is larger than 64 KiB (" + std::to_string(text.size()) + " bytes)";
      } else if (!IsUtf8(text)) {
        u.content_note = "the file is not UTF-8 text";
      } else {
        u.content = text;  // someone else's: what an adopt would replace, for the diff
      }
    } else if (p.load_state != "not-found" && !p.fragment_path.empty()) {
      // A unit from another directory (/usr/lib/systemd/system, /run/...): berth's unit
      // directory has no file of that name, so it is not berth's.
      u.content_hash = "elsewhere:" + p.fragment_path;
      u.content_note = "the file is " + p.fragment_path + ", outside berth's unit directory";
    }
    if (u.load_state == "not-found" && !u.content_hash.empty() && u.fragment_path.empty())
      u.fragment_path = files.PathOf(p.name);
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace berth
