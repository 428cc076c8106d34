// `berth status`: what runs now, from what berth observes and what it recorded. A value made by
// a pure function (MakeStatus), printed as text or JSON; the command does the observing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/desired.h"
#include "core/observed.h"
#include "engine/state/bench_history.h"

namespace berth {

struct ServiceStatus {
  std::string name, unit;
  std::string wanted;               // running | stopped | absent
  std::string active, sub;          // systemd's states; "not-found" when there is no unit
  uint32_t restarts = 0;            // automatic restarts (systemd's NRestarts)
  std::string crash_looping;        // CrashLoopDetail when it crash-loops; "" when it does not
  bool asleep = false;              // its server said it sleeps (standby: sleep)
  std::string boot;                 // enabled | disabled | static | ...
  std::string model, repo, commit;  // commit: what the unit runs (from its ExecStart)
  int port = 0;
  /// on_demand: "idle" (its socket listens, its server does not run), "starting" (woken,
  /// not yet healthy), "running", or "closed" (its socket does not listen); "" otherwise.
  std::string on_demand;
  std::string health;              // "healthy", "unhealthy: ...", "" when not probed
  uint64_t active_since_usec = 0;  // unix µs; 0 unknown or not running
  /// Its last start-to-healthy time: berth's record, or for an on-demand server a newer start a
  /// request made, as systemd timed it (BerthState::UnrecordedStart).
  std::optional<uint64_t> last_start_ms;
  std::optional<BenchLevel> last_bench;  // the highest concurrency of its newest bench run
  std::string last_bench_time;
};

struct RevisionStatus {
  std::string commit;
  bool complete = false;
  uint64_t bytes = 0;
  std::vector<std::string> refs;
};

struct ModelStatus {
  std::string name, repo, revision;
  std::string pinned;  // the commit berth.lock pins, "" when unpinned
  std::vector<RevisionStatus> revisions;
  std::vector<std::string> used_by;  // services the manifest runs on it
};

struct StatusView {
  std::string host;
  std::vector<ServiceStatus> services;
  std::vector<ModelStatus> models;
  std::string held;                   // a held change, in words; "" when none
  std::vector<std::string> warnings;  // what could not be observed
};

/// The commit a unit file runs: the 40-hex folder after "/snapshots/" in its text; "" if none.
std::string CommitInUnit(const std::string& unit_text);

/// `health`: the probe of each service that berth asked (by service name), as a word or a
/// sentence; services not in it show no health.
StatusView MakeStatus(const Desired& d, const Observed& o,
                      const std::map<std::string, std::string>& health,
                      const std::vector<BenchRecord>& bench);

std::string StatusText(const StatusView& v, double now_unix);
std::string StatusJson(const StatusView& v);

}  // namespace berth
