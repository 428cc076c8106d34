#include "planners/fleet.h"

#include <algorithm>

#include "planners/glob.h"

namespace berth {
namespace {

std::string Short(const std::string& digest) { return digest.substr(0, 12); }

}  // namespace

size_t WaveIndex(const FleetSpec& fleet, const std::string& host) {
  for (size_t i = 0; i < fleet.waves.size(); ++i)
    for (const std::string& glob : fleet.waves[i].hosts)
      if (GlobMatch(glob, host)) return i;
  return fleet.waves.size();
}

std::string WaveName(const FleetSpec& fleet, size_t index) {
  if (fleet.waves.empty()) return "";
  return index < fleet.waves.size() ? fleet.waves[index].name : "(after all waves)";
}

std::optional<size_t> FirstDisruptiveStep(const Plan& plan) {
  for (size_t i = 0; i < plan.actions.size(); ++i)
    if (plan.actions[i].takes_down) return i;
  return std::nullopt;
}

FleetTurnVerdict MayGoDark(const FleetSpec& fleet, const std::string& host,
                           const std::string& digest, const std::vector<FleetReport>& reports) {
  for (const FleetReport& r : reports) {
    bool looping = r.state == kFleetCrashLooping;
    if (r.host == host || r.digest != digest || (r.state != kFleetFailed && !looping)) continue;
    return {FleetTurnVerdict::kStop,
            "the rollout of manifest " + Short(digest) +
                " stopped: " + (looping ? "a service crash-loops" : "it failed") + " on " + r.host +
                (r.message.empty() ? "" : " (" + FleetMessageLine(r.message) + ")") +
                "; no host of fleet " + fleet.name +
                " takes a service down for it until the manifest changes"};
  }
  size_t mine = WaveIndex(fleet, host);
  for (size_t w = 0; w < mine && w < fleet.waves.size(); ++w) {
    const std::string& wave = fleet.waves[w].name;
    int reported = 0;
    for (const FleetReport& r : reports) {
      if (r.host == host || WaveIndex(fleet, r.host) != w) continue;
      ++reported;
      if (r.digest == digest && r.state == kFleetConverged) continue;
      std::string where = r.digest == digest ? "is " + r.state + " at this manifest"
                                             : "runs manifest " + Short(r.digest) + " (" + r.state +
                                                   "), not " + Short(digest) + " yet";
      return {FleetTurnVerdict::kWait, "wave " + wave + " goes first: " + r.host + " " + where};
    }
    if (reported == 0)
      return {FleetTurnVerdict::kWait, "wave " + wave +
                                           " goes first, and no host of it has reported to fleet " +
                                           fleet.name + " yet"};
  }
  return {FleetTurnVerdict::kGo, ""};
}

}  // namespace berth
