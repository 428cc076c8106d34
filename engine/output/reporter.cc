#include "engine/output/reporter.h"

#include "engine/output/plan_output.h"

namespace berth {

void Reporter::ShowPlan(const Plan& plan, const Desired& desired) {
  PlanTextOptions text;
  text.diffs = diffs_;
  out_ << (format_ == PlanFormat::kJson ? PlanToJson(plan, desired)
                                        : PlanToText(plan, desired, text))
       << std::flush;
}

void Reporter::Info(const std::string& line) { progress() << line << "\n" << std::flush; }

void Reporter::Error(const std::string& line) { err_ << line << "\n" << std::flush; }

}  // namespace berth
