// Download progress for people: on a terminal a bar per model (bytes, rate, ETA) redrawn in
// place; elsewhere a log line every few seconds.
#pragma once

#include <chrono>
#include <ostream>

#include "providers/hub/hub_types.h"

namespace berth {

class ProgressPrinter {
 public:
  /// `tty`: redraw in place; else one line per `log_every`.
  ProgressPrinter(std::ostream& out, bool tty,
                  std::chrono::milliseconds log_every = std::chrono::seconds(10))
      : out_(out), tty_(tty), log_every_(log_every) {}
  void Update(const PullProgress& p);
  /// The final line for a model.
  void Done(const PullProgress& p);

 private:
  std::string Line(const PullProgress& p) const;
  std::ostream& out_;
  bool tty_;
  std::chrono::milliseconds log_every_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace berth
