#include <string>
#include <vector>

#include "core/units.h"
#include "engine/output/plan_output.h"

namespace berth {
namespace {

// One count of the summary: "2 unit files to write". Consecutive items of one noun share it:
// "1 service to start, 1 to stop".
struct Item {
  ActionKind kind;
  const char* one;   // the noun for 1: "model"
  const char* many;  // for more: "models"
  const char* verb;  // "to download"; "" for none
};

constexpr Item kItems[] = {
    {ActionKind::kDownload, "model", "models", "to download"},
    {ActionKind::kPreflight, "preflight command", "preflight commands", "to run"},
    {ActionKind::kRemoveModel, "model", "models", "to remove"},
    {ActionKind::kWriteUnit, "unit file", "unit files", "to write"},
    {ActionKind::kRemoveUnit, "unit file", "unit files", "to remove"},
    {ActionKind::kDaemonReload, "daemon-reload", "daemon-reloads", ""},
    {ActionKind::kStart, "service", "services", "to start"},
    {ActionKind::kRestart, "service", "services", "to restart"},
    {ActionKind::kStop, "service", "services", "to stop"},
    {ActionKind::kSleep, "service", "services", "to put to sleep"},
    {ActionKind::kWake, "service", "services", "to wake"},
    {ActionKind::kWaitHealthy, "health gate", "health gates", ""},
    {ActionKind::kSmoke, "smoke gate", "smoke gates", ""},
    {ActionKind::kFloor, "throughput floor", "throughput floors", ""},
    {ActionKind::kSoak, "soak", "soaks", ""},
    {ActionKind::kReference, "floor reference", "floor references", "to measure"},
    {ActionKind::kPrewarm, "model", "models", "to prewarm"},
    {ActionKind::kEnable, "unit", "units", "to enable at boot"},
    {ActionKind::kDisable, "unit", "units", "to disable at boot"},
};

}  // namespace

std::string PlanSummary(const Plan& plan) {
  if (plan.actions.empty()) return "";
  std::vector<std::string> parts;
  const char* last_noun = "";
  for (const Item& item : kItems) {
    size_t n = 0;
    for (const Action& a : plan.actions) n += a.kind == item.kind ? 1 : 0;
    if (n == 0) continue;
    std::string part = std::to_string(n);
    if (std::string(item.one) != last_noun || *item.verb == '\0')
      part += std::string(" ") + (n == 1 ? item.one : item.many);
    if (*item.verb != '\0') part += std::string(" ") + item.verb;
    if (item.kind == ActionKind::kDownload)
      part += " (" + std::string(plan.disk_known ? "" : "at least ") +
              FormatBytes(plan.disk_needed) + ")";
    parts.push_back(std::move(part));
    last_noun = item.one;
  }
  std::string out = plan.blocked() ? "Plan (blocked, nothing runs): " : "Plan: ";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  // Ports that go dark, or whose requests a front holds; a make-before-break port does neither.
  bool first = true;
  for (const Disruption& d : plan.disruptions) {
    if (d.front_mode == "none") continue;
    out += (first ? "; " : ", ") + std::string("port ") + std::to_string(d.port) +
           (d.front_mode == "held" ? " held from step " : " dark from step ") +
           std::to_string(d.from_step + 1) +
           (d.until_step ? " until step " + std::to_string(*d.until_step + 1) : " on");
    first = false;
  }
  return out + ".";
}

}  // namespace berth
