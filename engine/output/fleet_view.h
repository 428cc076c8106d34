// `berth fleet status`: every host of a fleet as it reported itself in etcd, and who holds the
// slots now, as text or JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/desired.h"
#include "core/fleet_report.h"

namespace berth {

struct FleetSlotView {
  std::string key;  // its etcd key
  FleetSlot slot;
};

struct FleetView {
  std::string fleet;
  std::string manifest_digest;  // the local manifest's
  int max_unavailable = 1;
  std::vector<std::string> waves;  // names, in order
  std::vector<FleetReport> hosts;  // sorted by wave, then host
  std::vector<FleetSlotView> slots;
  std::vector<std::string> warnings;  // reports or slots berth could not read
  int64_t now_unix = 0;
};

/// The view of `fleet` from what etcd holds (hosts ordered by their wave, then name).
FleetView MakeFleetView(const FleetSpec& fleet, const std::string& digest,
                        std::vector<FleetReport> reports, std::vector<FleetSlotView> slots,
                        std::vector<std::string> warnings, int64_t now_unix);
std::string FleetViewText(const FleetView& v);
std::string FleetViewJson(const FleetView& v);

}  // namespace berth
