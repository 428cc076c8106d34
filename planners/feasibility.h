// Can a step run? The disk check of the downloads, and what a start needs stopped first (port,
// GPU memory) or cannot get at all. Answers only: the sequence decides the order. Internal to
// planners/.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/plan.h"
#include "planners/draft.h"
#include "planners/host_ledger.h"

namespace berth {

/// The disk a plan's downloads have: the store's free space less the manifest's reserve.
struct DiskBudget {
  uint64_t free = 0;
  uint64_t reserve = 0;
  std::string store_path;
  uint64_t available() const { return free > reserve ? free - reserve : 0; }
};

/// The problem of downloads that need `needed` bytes up to `step` (0-based), or nullopt when
/// they fit.
std::optional<Problem> DiskShortfall(const DiskBudget& disk, uint64_t needed, size_t step);

/// The units the plan will still stop or restart, as the sequence knows them at a step.
struct PendingUnits {
  std::function<bool(const std::string& unit)> stop;     // a stop still to come
  std::function<bool(const std::string& unit)> restart;  // a restart still to come
  /// Whether any stop is still to come: when none is, a start replaces nothing (ReplacedBy
  /// looks at no holder; a plan of thousands of new services on shared GPUs looked at each
  /// GPU's thousand holders for every start).
  bool any_stop = true;
};

/// GPU indexes as a reader writes them: "0-7", "0,2", "3".
std::string GpuList(const std::vector<int>& gpus);

/// What a start or restart needs before it can run.
struct StartNeeds {
  std::vector<std::string> stops;  // pending units to stop first, in the order found
  std::vector<Problem> problems;   // what no stop of this plan can solve (step unset)
  /// Why those stops come first, exactly: "port 8000 is held by x.service until it stops",
  /// "GPU 0: needs 72 GiB, 8 GiB free while x.service runs".
  std::vector<std::string> why;
};

/// The stops `start` needs first: the holder of its port when that holder is to stop or restart
/// anyway, and for each GPU whose free memory is short of its claim, pending holders, largest
/// first (names breaking ties), until the claim fits. What still does not fit is a problem.
StartNeeds NeedsOf(const Transition& start, HostLedger& host, const PendingUnits& pending);

/// The pending units a stop-first service replaces: those holding its port or its GPUs.
std::vector<std::string> ReplacedBy(const Transition& start, HostLedger& host,
                                    const PendingUnits& pending);

}  // namespace berth
