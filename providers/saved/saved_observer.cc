#include "providers/saved/saved_observer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/core/observed_json.h"

namespace berth {

Result<Observed> SavedObserver::Observe(const Desired&) {
  std::ifstream in(path_, std::ios::binary);
  if (!in)
    return Status::NotFound("cannot read saved observation " + path_ + ": " + std::strerror(errno) +
                            "; create one on the host with `berth observe -o json > FILE`");
  std::ostringstream text;
  text << in.rdbuf();
  return ObservedFromJson(text.str(), path_);
}

}  // namespace berth
