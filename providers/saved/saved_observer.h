// A saved observation (`berth observe -o json > host.json`) standing in for the live host:
// offline plans, CI reviews of pull requests.
#pragma once

#include <string>

#include "providers/observer.h"

namespace berth {

class SavedObserver : public HostObserver {
 public:
  /// Each Observe reads `path` (at most 256 MiB) and checks it (ObservedFromJson).
  explicit SavedObserver(std::string path) : path_(std::move(path)) {}
  Result<Observed> Observe(const Desired& desired) override;

 private:
  std::string path_;
};

}  // namespace berth
