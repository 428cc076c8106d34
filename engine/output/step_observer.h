// What the executor tells as it runs a plan: every step's state, the lines of what a step or an
// undo does, and the downloads' progress. The journal (engine/apply/reconciler.cc) and the
// progress lines people read (ProgressLines, engine/output/progress.h) are both observers: the
// executor writes to no stream of its own.
#pragma once

#include <cstdint>
#include <string>

#include "core/plan.h"
#include "providers/hub/hub_types.h"

namespace berth {

/// Where a step stands.
enum class StepState { kRunning, kDone, kFailed };
/// The journal's words for it: "running", "done", "failed" (what its state files hold).
const char* StepStateName(StepState s);

struct StepEvent {
  int step = 0;   // 1-based
  int steps = 0;  // in the plan
  const Action* action = nullptr;
  StepState state = StepState::kRunning;
  std::string message;      // kFailed: why; "" otherwise
  uint64_t elapsed_ms = 0;  // kDone, kFailed: since the step began
  /// kDone of a health gate: how long its service took from its start or restart to healthy
  /// (0: not a switch's gate).
  uint64_t healthy_after_ms = 0;
};

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  /// A step began or ended. Downloads side by side are reported from the calling thread.
  virtual void OnStep(const StepEvent& e) = 0;
  /// A line of what a step or an undo does ("rollback: start x again", "floor: x passed: ...",
  /// "steps 3-6: 2 services start side by side"), already free of control characters.
  virtual void OnNote(const std::string& line) { (void)line; }
  /// A download's progress (`finished`: its last report), from the downloading threads: several
  /// may call at once.
  virtual void OnDownload(const PullProgress& p, bool finished) {
    (void)p;
    (void)finished;
  }
};

}  // namespace berth
