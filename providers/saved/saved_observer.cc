#include "providers/saved/saved_observer.h"

#include "core/observed_json.h"
#include "core/read_file.h"

namespace berth {

Result<Observed> SavedObserver::Observe(const Desired&) {
  // The operator names it (a link is theirs to follow); a regular file, bounded, never a read
  // that blocks.
  Result<std::string> text =
      ReadRegularFile(path_, {.max_bytes = uint64_t{256} << 20, .follow_links = true});
  if (!text.ok())
    return Status::NotFound("cannot read saved observation: " + text.status().message() +
                            "; create one on the host with `berth observe -o json > FILE`");
  return ObservedFromJson(*text, path_);
}

}  // namespace berth
