#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "core/json_text.h"
#include "core/observed.h"
#include "engine/output/plan_output.h"

namespace berth {
namespace {

using nlohmann::ordered_json;

// Terraform's vocabulary for what an action does to its resource.
const char* TerraformAction(const Action& a) {
  switch (a.kind) {
    case ActionKind::kDownload:
      return "create";
    case ActionKind::kWriteUnit:
      return a.As<UnitFileStep>().replaces ? "update" : "create";
    case ActionKind::kRemoveModel:
    case ActionKind::kRemoveUnit:
      return "delete";
    case ActionKind::kWaitHealthy:
    case ActionKind::kPreflight:
    case ActionKind::kSmoke:
    case ActionKind::kFloor:
    case ActionKind::kSoak:
    case ActionKind::kReference:
    case ActionKind::kDrain:
    case ActionKind::kPrewarm:
      return "read";
    default:
      return "update";
  }
}

ordered_json ResourcesToJson(const Resources& r) {
  ordered_json gpus = ordered_json::object();
  for (const auto& [i, b] : r.gpu_bytes) gpus[std::to_string(i)] = b;
  return {{"disk_bytes", r.disk_bytes}, {"gpu_bytes", std::move(gpus)}, {"ports", r.ports}};
}

// The name of the object that shows a step's payload (core/steps.h: Shown), by kind.
const char* PayloadName(ActionKind k) {
  switch (k) {
    case ActionKind::kDownload:
    case ActionKind::kRemoveModel:
      return "model";
    case ActionKind::kWaitHealthy:
      return "health";
    case ActionKind::kPreflight:
      return "preflight";
    case ActionKind::kSmoke:
      return "smoke";
    case ActionKind::kFloor:
      return "floor";
    case ActionKind::kReference:
      return "reference";
    case ActionKind::kSleep:
      return "sleep";
    case ActionKind::kWake:
      return "wake";
    case ActionKind::kPrewarm:
      return "prewarm";
    case ActionKind::kSoak:
      return "soak";
    case ActionKind::kWriteFront:
    case ActionKind::kRoute:
    case ActionKind::kDrain:
    case ActionKind::kReady:
      return "front";
    default:
      return nullptr;
  }
}

// The fields of `payload` shown in `where`, under their shown names.
template <class T>
ordered_json Shows(const T& payload, Shown where) {
  ordered_json j = ordered_json::object();
  ForEachStepField(payload, [&](const auto& field, const auto& value) {
    if (field.shown != where) return;
    if constexpr (requires { value.empty(); })
      if (where == Shown::kNotEmpty && value.empty()) return;
    const char* name = field.shown_as ? field.shown_as : field.key;
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, GateFigures>)
      j[name] = value.empty() ? ordered_json(nullptr) : ordered_json(value);  // null: none
    else
      j[name] = value;
  });
  return j;
}

// One entry of resource_changes (step i + 1).
ordered_json ActionToJson(const Action& a, size_t i) {
  ordered_json j = {{"step", i + 1},
                    {"address", a.address},
                    {"action", ActionKindName(a.kind)},
                    {"change", {{"actions", ordered_json::array({TerraformAction(a)})}}},
                    {"action_reason", ReasonName(a.reason)},
                    {"detail", a.detail},
                    {"requires", ResourcesToJson(a.requires_)},
                    {"frees", ResourcesToJson(a.frees)}};
  std::visit(
      [&](const auto& p) {
        const char* name = PayloadName(a.kind);
        if (!name) return;
        ordered_json shown = Shows(p, Shown::kAlways);
        if (a.kind == ActionKind::kWriteFront) shown.update(Shows(p, Shown::kWriteFront));
        if constexpr (std::is_same_v<std::decay_t<decltype(p)>, FloorStep>) {
          if (a.kind == ActionKind::kFloor) {
            shown.update(Shows(p, Shown::kLimit));
            if (p.has_goodput()) shown["goodput"] = Shows(p, Shown::kGoodput);
            if (p.relative()) shown["relative"] = Shows(p, Shown::kRelative);
          }
        }
        j[name] = std::move(shown);
        if constexpr (std::is_same_v<std::decay_t<decltype(p)>, PreflightStep>)
          if (!p.engine.empty()) j["engine_check"] = Shows(p, Shown::kEngineCheck);
      },
      a.step);
  if (a.kind != ActionKind::kDownload && a.kind != ActionKind::kRemoveModel &&
      a.kind != ActionKind::kDaemonReload)
    j["unit"] = a.unit;
  if (a.kind == ActionKind::kWriteUnit) j["diff"] = UnitFileDiff(a);
  std::visit([&](const auto& p) { j.update(Shows(p, Shown::kNotEmpty)); }, a.step);
  return j;
}

// Steps as this form numbers them: 1-based.
std::vector<size_t> OneBased(std::vector<size_t> steps) {
  for (size_t& i : steps) ++i;
  return steps;
}

}  // namespace

std::string PlanToJson(const Plan& plan, const Desired& desired) {
  std::ostringstream out;
  WritePlanJson(out, plan, desired);
  return out.str();
}

void WritePlanJson(std::ostream& out, const Plan& plan, const Desired& desired) {
  ordered_json j = {{"format_version", Plan::kFormatVersion},
                    {"berth_version", BERTH_VERSION},
                    {"host", plan.host},
                    {"manifest", {{"digest", desired.digest}, {"files", desired.files}}}};
  j["status"] = !plan.host_matches ? "not_applicable"
                : plan.blocked()   ? "blocked"
                : plan.empty()     ? "no_changes"
                                   : "changes";
  j["applies_to_host"] = plan.host_matches;
  if (!plan.host_matches) j["skip_reason"] = plan.skip_reason;
  ordered_json& changes = j["resource_changes"] = ordered_json::array();
  for (size_t i = 0; i < plan.actions.size(); ++i)
    changes.push_back(ActionToJson(plan.actions[i], i));
  ordered_json& unchanged = j["unchanged"] = ordered_json::array();
  for (const auto& n : plan.notes) {
    unchanged.push_back({{"address", n.address}, {"detail", n.detail}});
    if (n.verb != "keep") unchanged.back()["verb"] = n.verb;
  }
  ordered_json& disruption = j["disruption"] = ordered_json::array();
  for (const auto& d : plan.disruptions) {
    // The format's steps are 1-based; its until_step 0: nothing ends it.
    ordered_json x = {{"port", d.port},
                      {"from_step", d.from_step + 1},
                      {"until_step", d.until_step ? *d.until_step + 1 : 0},
                      {"service", d.service},
                      {"reason", d.reason}};
    // Behind a front: "held" (requests wait, up to hold_ms) or "none" (make-before-break).
    if (!d.front_mode.empty()) {
      x["front"] = d.front_mode;
      if (d.front_mode == "held") x["hold_ms"] = d.hold_ms;
    }
    // The estimate (planners/dark_windows.h): null and [] when nothing estimates it.
    const DarkEstimate& e = d.estimate;
    x["expected_ms"] = e.expected_ms ? ordered_json(*e.expected_ms) : ordered_json(nullptr);
    x["worst_ms"] = e.gate_unit.empty() ? ordered_json(nullptr) : ordered_json(e.worst_ms);
    x["samples"] = e.samples_ms;
    if (!e.gate_unit.empty()) x["samples_unit"] = e.gate_unit;
    // The stop or restart that begins it: its recorded stops, its timeout (null: not known;
    // "infinity": systemd never times it out).
    if (!e.gate_unit.empty() && !e.stop_unit.empty())
      x["stop"] = {{"unit", e.stop_unit},
                   {"samples", e.stop_samples_ms},
                   {"timeout_ms", e.stop_timeout_ms == ObservedUnit::kNoStopTimeout
                                      ? ordered_json("infinity")
                                  : e.stop_timeout_ms == 0 ? ordered_json(nullptr)
                                                           : ordered_json(e.stop_timeout_ms)}};
    if (!d.caveat.empty()) x["caveat"] = d.caveat;
    disruption.push_back(std::move(x));
  }
  // Each switch as the planner stated it; steps 1-based, like the rest of this form.
  ordered_json& switches = j["switches"] = ordered_json::array();
  for (const Switch& sw : plan.switches) {
    ordered_json replaces = ordered_json::array();
    for (const Replaced& r : sw.replaces)
      replaces.push_back({{"address", r.address},
                          {"unit", r.unit},
                          {"stop_step", r.stop_step + 1},
                          {"health", Shows(r.gate, Shown::kAlways)}});
    ordered_json x = {{"address", sw.address},           {"unit", sw.unit},
                      {"mode", SwitchModeName(sw.mode)}, {"steps", OneBased(sw.steps)},
                      {"start", sw.start + 1},           {"gates", OneBased(sw.gates)},
                      {"replaces", std::move(replaces)}, {"restores_unit", sw.restores_unit},
                      {"needs_turn", sw.needs_turn},     {"group", sw.group}};
    // Behind a front: its public port, the backend port, and where the undo routes back.
    if (sw.front_port)
      x["front"] = {{"port", sw.front_port},
                    {"backend_port", sw.backend_port},
                    {"undo_route", sw.undo_route}};
    switches.push_back(std::move(x));
  }
  ordered_json problems = ordered_json::array();
  for (const auto& p : plan.problems)  // the format's step is 1-based; 0: before any step
    problems.push_back({{"step", p.step ? *p.step + 1 : 0},
                        {"resource", p.resource},
                        {"message", p.message},
                        {"needed", p.needed},
                        {"available", p.available}});
  j["feasibility"] = {{"feasible", !plan.blocked()},
                      {"disk",
                       {{"needed_bytes", plan.disk_needed},
                        {"free_bytes", plan.disk_free},
                        {"reserve_bytes", plan.disk_reserve},
                        {"sizes_known", plan.disk_known}}},
                      {"problems", std::move(problems)}};
  j["warnings"] = plan.warnings;
  out << DumpJson(j, 2) << "\n";
}

}  // namespace berth
