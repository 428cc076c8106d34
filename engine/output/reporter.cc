#include "engine/output/reporter.h"

#include "core/untrusted_text.h"
#include "engine/output/plan_output.h"

namespace berth {

void Reporter::ShowPlan(const Plan& plan, const Desired& desired) {
  PlanTextOptions text;
  text.diffs = diffs_;
  if (format_ == PlanFormat::kJson)
    WritePlanJson(out_, plan, desired);
  else
    WritePlanText(out_, plan, desired, text);
  out_ << std::flush;
}

// Lines quote what berth did not write (a server's answer, a command's output, a file name): the
// terminal sees its controls as \xNN, whatever the caller forgot.
void Reporter::Info(const std::string& line) {
  progress() << EscapeControl(line) << "\n" << std::flush;
}

void Reporter::Error(const std::string& line) { err_ << EscapeControl(line) << "\n" << std::flush; }

}  // namespace berth
