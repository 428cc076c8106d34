// Reporter: everything a reconcile pass tells the person or program that started it, in one
// place. The plan goes to `out` as text or JSON; in JSON mode every other line goes to `err`, so
// `berth plan -o json` prints a document a program can parse and nothing else.
#pragma once

#include <ostream>
#include <string>

#include "core/desired.h"
#include "core/plan.h"

namespace berth {

enum class PlanFormat { kText, kJson };

class Reporter {
 public:
  /// `tty`: download progress is drawn as bars (else log lines).
  Reporter(std::ostream& out, std::ostream& err, PlanFormat format = PlanFormat::kText,
           bool tty = false)
      : out_(out), err_(err), format_(format), tty_(tty) {}

  /// The plan, in the chosen format.
  void ShowPlan(const Plan& plan, const Desired& desired);
  /// Text plans show every write-unit's diff (`--diff`); default false: only adopted and
  /// drifted units show theirs. JSON always carries them.
  void set_diffs(bool on) { diffs_ = on; }
  /// A line for the reader ("Saved to plan.json; ..."): `out` for text, `err` for JSON. Its
  /// control characters but newline and tab reach the terminal as \xNN (EscapeControl).
  void Info(const std::string& line);
  /// What went wrong and what to do: always `err`, escaped as Info's.
  void Error(const std::string& line);
  /// Where the executor's per-action lines and download bars go.
  std::ostream& progress() { return format_ == PlanFormat::kJson ? err_ : out_; }
  bool tty() const { return tty_; }
  PlanFormat format() const { return format_; }

 private:
  std::ostream& out_;
  std::ostream& err_;
  PlanFormat format_;
  bool tty_;
  bool diffs_ = false;
};

}  // namespace berth
