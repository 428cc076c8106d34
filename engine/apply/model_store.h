// ModelStore: what the executor asks of the model store. The real one pulls from the Hub into
// the HF cache (providers/hub); tests use an in-memory store on the fake host.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "core/plan.h"
#include "core/status.h"
#include "providers/hub/hub_types.h"

namespace berth {

/// A finished download.
struct Fetched {
  std::string commit;          // what the revision resolved to (40 hex)
  uint64_t bytes_total = 0;    // of the files of the snapshot berth keeps
  uint64_t bytes_fetched = 0;  // over the network in this run
  int files = 0;
  double seconds = 0;
};

class ModelStore {
 public:
  virtual ~ModelStore() = default;
  /// Downloads and verifies what a download action names (repo, revision, the commit the plan
  /// pinned, include/exclude). `cancel` stops it between transfers (partial bytes stay);
  /// `on_progress` is called a few times a second from the downloading thread. Thread-safe:
  /// downloads at the head of a plan run side by side.
  virtual Result<Fetched> Download(const DownloadStep& download, const std::atomic<bool>* cancel,
                                   const std::function<void(const PullProgress&)>& on_progress) = 0;
  /// Removes repo_id@commit and the blobs nothing else uses; returns the bytes freed.
  virtual Result<uint64_t> Remove(const std::string& repo_id, const std::string& commit) = 0;
};

/// The HF cache at `store`, filled from the Hub reached with `hub`; a download refuses to leave
/// less than `reserve_bytes` free on the store's file system (the manifest's host.reserve).
class HubModelStore : public ModelStore {
 public:
  HubModelStore(std::string store, HubOptions hub, uint64_t reserve_bytes = 0)
      : store_(std::move(store)), hub_(hub), reserve_bytes_(reserve_bytes) {}
  Result<Fetched> Download(const DownloadStep& download, const std::atomic<bool>* cancel,
                           const std::function<void(const PullProgress&)>& on_progress) override;
  Result<uint64_t> Remove(const std::string& repo_id, const std::string& commit) override;

 private:
  std::string store_;
  HubOptions hub_;
  uint64_t reserve_bytes_ = 0;
};

}  // namespace berth
