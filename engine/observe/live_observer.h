// The live host: the store on disk, systemd's units and berth's unit files, listening ports.
#pragma once

#include <string>

#include "providers/observer.h"

namespace berth {

class SystemdManager;
class UnitFileStore;

struct LiveObserverOptions {
  SystemdManager* systemd = nullptr;    // required
  UnitFileStore* unit_files = nullptr;  // required: the manifest's host.unit_dir
  std::string proc_root = "/proc";
};

class LiveObserver : public HostObserver {
 public:
  explicit LiveObserver(LiveObserverOptions options) : opt_(std::move(options)) {}
  Result<Observed> Observe(const Desired& desired) override;

 private:
  LiveObserverOptions opt_;
};

/// The store berth uses when the manifest names none: $HF_HUB_CACHE, $HF_HOME/hub, or
/// ~/.cache/huggingface/hub (huggingface_hub's rules).
std::string DefaultStorePath();

}  // namespace berth
