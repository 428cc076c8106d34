// A saved observation (`berth observe -o json > host.json`) standing in for the live host:
// offline plans, CI reviews of pull requests.
#pragma once

#include <future>
#include <string>
#include <thread>

#include "providers/observer.h"

namespace berth {

class SavedObserver : public HostObserver {
 public:
  /// Starts reading `path` (unless it is "") on a thread of its own, so that a big observation
  /// (19 MB at 10,000 services) is read while the manifests are; the first Observe takes it.
  /// That thread hands the Observed on first and frees the parsed document after, while the
  /// plan is made.
  explicit SavedObserver(std::string path);
  ~SavedObserver() override;
  SavedObserver(const SavedObserver&) = delete;
  SavedObserver& operator=(const SavedObserver&) = delete;
  Result<Observed> Observe(const Desired& desired) override;

 private:
  std::string path_;
  std::future<Result<Observed>> first_;  // the read started by the constructor, until taken
  std::thread reader_;
};

}  // namespace berth
