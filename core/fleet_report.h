// What each host of a fleet publishes in etcd about itself (<prefix><fleet>/hosts/<host>), and
// what a slot holds (<prefix><fleet>/slots/<n>). Values: the rules are in planners/fleet.h,
// the etcd calls in engine/fleet/fleet_turn.h. Read back from etcd, they are untrusted: the
// parsers bound and check every field and never throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "core/status.h"

namespace berth {

/// Where a host stands with the manifest it runs (FleetReport::state).
inline constexpr const char* kFleetConverged = "converged";  // applied, gates passed, no changes
inline constexpr const char* kFleetFailed = "failed";    // a switch of this manifest failed: stops
                                                         // the rollout until the manifest changes
inline constexpr const char* kFleetWaiting = "waiting";  // waits for its turn to go dark
inline constexpr const char* kFleetSwitching = "switching";  // holds a slot, going dark now
inline constexpr const char* kFleetError =
    "error";  // the pass ended early (retried): not converged
inline constexpr const char* kFleetBlocked = "blocked";  // its plan cannot run here
/// Nothing left to do, but a service it wants running crash-loops (systemd keeps restarting it,
/// or gave up): not converged; like failed, it stops the rollout of its manifest.
inline constexpr const char* kFleetCrashLooping = "crash-looping";
bool IsFleetState(const std::string& s);

struct FleetReport {
  std::string host;
  std::string wave;    // the wave it is in ("" without waves)
  std::string digest;  // the manifest's digest (sha256 hex)
  std::string state;   // one of the kFleet* above
  /// Why it is in that state, in full (a failed switch's error with its journal excerpt: several
  /// lines). Where one line must do (fleet status's column, another host's error),
  /// FleetMessageLine.
  std::string message;
  int64_t updated_unix = 0;
  int services_up = 0;
  int services_wanted = 0;
  /// unit -> ms from its start to its health gate passing, in this host's last switch.
  std::map<std::string, uint64_t> start_to_healthy_ms;
  /// unit -> what its throughput floor gate measured in that switch.
  std::map<std::string, std::string> floor_figures;
  /// unit -> what a relative floor's reference measured on it before that switch.
  std::map<std::string, std::string> reference_figures;
  std::string berth_version;
};

/// Written with `message` cut to FleetReport's bound (4 KiB, on a character boundary), so that
/// every host can read it back.
std::string FleetReportToJson(const FleetReport& r);
/// The most a report may be; a larger one is not read (berth writes a few KiB).
inline constexpr size_t kMaxFleetReportBytes = 64 * 1024;
/// The most a slot may be.
inline constexpr size_t kMaxFleetSlotBytes = 4096;
/// Parses a report read from etcd at `where` (its key, for messages).
Result<FleetReport> FleetReportFromJson(const std::string& text, const std::string& where);

/// Who holds a slot.
struct FleetSlot {
  std::string host;
  std::string digest;
  int64_t since_unix = 0;
};
std::string FleetSlotToJson(const FleetSlot& s);
Result<FleetSlot> FleetSlotFromJson(const std::string& text, const std::string& where);

/// The one line of a report's `message` for a table column or another host's error: its first
/// line that is not blank, without leading and trailing whitespace, at most `max_bytes` bytes cut
/// on a UTF-8 character boundary, with "…" where it was cut or lines were left out.
std::string FleetMessageLine(const std::string& message, size_t max_bytes = 160);

/// "hosts/" keys carry host names: what berth accepts as one (a DNS-like name, 1-253 bytes of
/// letters, digits, '.', '-', '_').
bool IsFleetHostName(const std::string& s);

}  // namespace berth
