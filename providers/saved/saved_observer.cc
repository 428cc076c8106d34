#include "providers/saved/saved_observer.h"

#include <system_error>

#include "core/observed_json.h"
#include "core/read_file.h"

namespace berth {

namespace {

Result<Observed> ReadObservation(const std::string& path, std::shared_ptr<void>* leftover) {
  // The operator names it (a link is theirs to follow); a regular file, bounded, never a read
  // that blocks.
  Result<std::string> text =
      ReadRegularFile(path, {.max_bytes = uint64_t{256} << 20, .follow_links = true});
  if (!text.ok())
    return Status::NotFound("cannot read saved observation: " + text.status().message() +
                            "; create one on the host with `berth observe -o json > FILE`");
  return ObservedFromJson(std::move(*text), path, leftover);
}

}  // namespace

SavedObserver::SavedObserver(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  std::promise<Result<Observed>> read;
  std::future<Result<Observed>> taken = read.get_future();
  try {
    reader_ = std::thread([path = path_, read = std::move(read)]() mutable {
      std::shared_ptr<void> leftover;
      try {
        read.set_value(ReadObservation(path, &leftover));
      } catch (...) {
        read.set_exception(std::current_exception());
      }
      leftover.reset();  // after the Observed is on its way
    });
    first_ = std::move(taken);
  } catch (const std::system_error&) {
    // No thread to be had: Observe reads it itself.
  }
}

SavedObserver::~SavedObserver() {
  if (reader_.joinable()) reader_.join();
}

Result<Observed> SavedObserver::Observe(const Desired&) {
  if (first_.valid()) return first_.get();
  return ReadObservation(path_, nullptr);
}

}  // namespace berth
