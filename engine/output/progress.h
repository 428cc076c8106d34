// Download progress for people: on a terminal a bar per model and one for the total (bytes,
// rate, ETA), redrawn in place; elsewhere a log line per model and the total every few seconds.
// Thread-safe: downloads run side by side and report from their own threads.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <ostream>
#include <string>

#include "engine/output/step_observer.h"
#include "providers/hub/hub_types.h"

namespace berth {

class ProgressPrinter {
 public:
  /// `tty`: redraw in place; else lines every `log_every`.
  ProgressPrinter(std::ostream& out, bool tty,
                  std::chrono::milliseconds log_every = std::chrono::seconds(10))
      : out_(out), tty_(tty), log_every_(log_every) {}
  /// The latest progress of one model (keyed by repo_id).
  void Update(const PullProgress& p);
  /// A model is finished: its final line (and the total's, when several run).
  void Done(const PullProgress& p);

  /// One model's line, or the total's (repo_id "total").
  static std::string Line(const PullProgress& p, bool bar);

 private:
  PullProgress Total() const;
  void Draw(bool final_line_for_done, const std::string& done_repo);
  std::ostream& out_;
  bool tty_;
  std::chrono::milliseconds log_every_;
  std::chrono::steady_clock::time_point last_{};
  std::mutex mu_;
  std::map<std::string, PullProgress> models_;  // in progress
  std::map<std::string, PullProgress> finished_;
  int drawn_ = 0;  // lines of the last redraw (tty)
};

/// The lines people read while a plan runs: "[3/7] start service/x ...", "[3/7] done in 1.2s",
/// the notes of steps and undos, and the download bars (ProgressPrinter).
class ProgressLines : public StepObserver {
 public:
  ProgressLines(std::ostream& out, bool tty) : out_(out), downloads_(out, tty) {}
  void OnStep(const StepEvent& e) override;
  void OnNote(const std::string& line) override;
  void OnDownload(const PullProgress& p, bool finished) override;

 private:
  std::ostream& out_;
  ProgressPrinter downloads_;
  std::mutex mu_;
};

}  // namespace berth
