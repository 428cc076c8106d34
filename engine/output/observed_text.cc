#include "engine/output/observed_text.h"

#include <sstream>

#include "core/units.h"

namespace berth {

std::string ObservedToText(const Observed& o) {
  std::ostringstream out;
  out << "host " << o.hostname << " at " << o.observed_at << "\n";
  out << "store " << o.store.path << (o.store.exists ? "" : " (missing)") << ": "
      << FormatBytes(o.store.free_bytes) << " free of " << FormatBytes(o.store.total_bytes) << "\n";
  for (const auto& r : o.store.repos)
    for (const auto& v : r.revisions)
      out << "  model " << r.repo_id << "@" << v.commit.substr(0, 7) << " "
          << FormatBytes(v.bytes_present) << (v.complete ? " complete" : " partial")
          << (v.resident_bytes && v.weights_bytes
                  ? ", " + FormatBytes(*v.resident_bytes) + " of its " +
                        FormatBytes(*v.weights_bytes) + " of weights in the page cache"
                  : std::string())
          << "\n";
  if (o.memory.known)
    out << "memory: " << FormatBytes(o.memory.available_bytes) << " available of "
        << FormatBytes(o.memory.total_bytes) << "\n";
  else if (!o.memory.error.empty())
    out << "memory: unknown (" << o.memory.error << ")\n";
  if (!o.gpus_known) out << "gpus: unknown (" << o.gpu_error << ")\n";
  if (!o.units_known) out << "units: unknown\n";
  for (const auto& w : o.warnings) out << "warning: " << w << "\n";
  for (const auto& g : o.gpus) {
    out << "gpu " << g.index << " " << g.name << ": " << FormatGiB(g.memory_used) << " used of "
        << FormatGiB(g.memory_total) << "\n";
    for (const auto& p : g.processes)
      out << "  pid " << p.pid << " " << p.name << " " << FormatGiB(p.used_bytes)
          << (p.unit.empty() ? " (no unit)" : " (" + p.unit + ")") << "\n";
  }
  for (const auto& u : o.units)
    out << "unit " << u.name << ": " << u.load_state << " " << u.active_state << "/" << u.sub_state
        << (u.unit_file_state.empty() ? "" : ", " + u.unit_file_state)
        << (u.managed ? " (berth)" : "")
        << (o.Asleep(u.name) ? ", asleep (standby: sleep; its GPU memory freed)" : "") << "\n";
  for (const auto& p : o.ports)
    out << "port " << p.port << " " << p.address << " pid " << p.pid << " " << p.process
        << (p.unit.empty() ? "" : " (" + p.unit + ")") << "\n";
  return out.str();
}

}  // namespace berth
