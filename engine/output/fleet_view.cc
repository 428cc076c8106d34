#include "engine/output/fleet_view.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/json_text.h"
#include "planners/fleet.h"

namespace berth {
namespace {

std::string Ago(int64_t now, int64_t then) {
  if (then <= 0) return "never";
  int64_t s = std::max<int64_t>(0, now - then);
  if (s < 120) return std::to_string(s) + "s ago";
  if (s < 7200) return std::to_string(s / 60) + "m ago";
  if (s < 2 * 86400) return std::to_string(s / 3600) + "h ago";
  return std::to_string(s / 86400) + "d ago";
}

bool Holds(const FleetView& v, const std::string& host) {
  return std::any_of(v.slots.begin(), v.slots.end(),
                     [&](const FleetSlotView& s) { return s.slot.host == host; });
}

}  // namespace

FleetView MakeFleetView(const FleetSpec& fleet, const std::string& digest,
                        std::vector<FleetReport> reports, std::vector<FleetSlotView> slots,
                        std::vector<std::string> warnings, int64_t now_unix) {
  FleetView v;
  v.fleet = fleet.name;
  v.manifest_digest = digest;
  v.max_unavailable = fleet.max_unavailable;
  for (const FleetWave& w : fleet.waves) v.waves.push_back(w.name);
  std::stable_sort(reports.begin(), reports.end(), [&](const FleetReport& a, const FleetReport& b) {
    size_t wa = WaveIndex(fleet, a.host), wb = WaveIndex(fleet, b.host);
    return wa != wb ? wa < wb : a.host < b.host;
  });
  for (FleetReport& r : reports) r.wave = WaveName(fleet, WaveIndex(fleet, r.host));
  v.hosts = std::move(reports);
  v.slots = std::move(slots);
  v.warnings = std::move(warnings);
  v.now_unix = now_unix;
  return v;
}

std::string FleetViewText(const FleetView& v) {
  std::ostringstream o;
  int converged = 0;
  for (const FleetReport& r : v.hosts)
    if (r.digest == v.manifest_digest && r.state == kFleetConverged) ++converged;
  o << "fleet " << v.fleet << ": " << v.hosts.size() << " host" << (v.hosts.size() == 1 ? "" : "s")
    << " reported, " << converged << " converged on this manifest ("
    << v.manifest_digest.substr(0, 12) << "); " << v.slots.size() << " of " << v.max_unavailable
    << " slot" << (v.max_unavailable == 1 ? "" : "s") << " held\n";
  if (!v.waves.empty()) {
    o << "waves:";
    for (const std::string& w : v.waves) o << " " << w;
    o << "\n";
  }
  std::vector<std::vector<std::string>> rows = {
      {"HOST", "WAVE", "STATE", "MANIFEST", "SERVICES", "UPDATED", "MESSAGE"}};
  for (const FleetReport& r : v.hosts) {
    std::string manifest = r.digest.substr(0, 12);
    if (r.digest != v.manifest_digest) manifest += " (other)";
    std::string state = r.state + (Holds(v, r.host) ? " *" : "");
    rows.push_back({r.host, r.wave.empty() ? "-" : r.wave, state, manifest,
                    std::to_string(r.services_up) + "/" + std::to_string(r.services_wanted),
                    Ago(v.now_unix, r.updated_unix), FleetMessageLine(r.message)});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i + 1 < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    o << line << "\n";
  }
  if (v.hosts.empty()) o << "(no host has reported yet)\n";
  for (const FleetSlotView& s : v.slots) {
    bool known = std::any_of(v.hosts.begin(), v.hosts.end(),
                             [&](const FleetReport& r) { return r.host == s.slot.host; });
    o << "* " << s.key << " held by " << s.slot.host << " since "
      << Ago(v.now_unix, s.slot.since_unix) << (known ? "" : " (a host with no report)") << "\n";
  }
  for (const std::string& w : v.warnings) o << "warning: " << w << "\n";
  return o.str();
}

std::string FleetViewJson(const FleetView& v) {
  using nlohmann::json;
  json hosts = json::array();
  for (const FleetReport& r : v.hosts) {
    hosts.push_back({{"host", r.host},
                     {"wave", r.wave},
                     {"state", r.state},
                     {"manifest_digest", r.digest},
                     {"on_this_manifest", r.digest == v.manifest_digest},
                     {"message", r.message},
                     {"updated_unix", r.updated_unix},
                     {"services_up", r.services_up},
                     {"services_wanted", r.services_wanted},
                     {"start_to_healthy_ms", r.start_to_healthy_ms},
                     {"floor_figures", r.floor_figures},
                     {"reference_figures", r.reference_figures},
                     {"berth_version", r.berth_version},
                     {"holds_slot", Holds(v, r.host)}});
  }
  json slots = json::array();
  for (const FleetSlotView& s : v.slots)
    slots.push_back({{"key", s.key},
                     {"host", s.slot.host},
                     {"manifest_digest", s.slot.digest},
                     {"since_unix", s.slot.since_unix}});
  json j = {{"format_version", 1},
            {"fleet", v.fleet},
            {"manifest_digest", v.manifest_digest},
            {"max_unavailable", v.max_unavailable},
            {"waves", v.waves},
            {"hosts", hosts},
            {"slots", slots},
            {"warnings", v.warnings}};
  return DumpJson(j, 2) + "\n";
}

}  // namespace berth
