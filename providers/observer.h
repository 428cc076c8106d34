// HostObserver: the seam through which berth sees a host. The live one asks the providers
// (store, GPUs, systemd, ports); the saved one reads `berth observe -o json` output.
#pragma once

#include "core/desired.h"
#include "core/observed.h"
#include "core/status.h"

namespace berth {

class HostObserver {
 public:
  virtual ~HostObserver() = default;
  /// What the host looks like now, for the resources `desired` names (and berth's own).
  virtual Result<Observed> Observe(const Desired& desired) = 0;
};

}  // namespace berth
