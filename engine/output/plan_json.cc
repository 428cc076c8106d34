#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
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
      return a.reason == Reason::kUnitMissing ? "create" : "update";
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
  switch (a.kind) {
    case ActionKind::kDownload: {
      const DownloadStep& d = a.As<DownloadStep>();
      j["model"] = {{"repo_id", d.repo_id},
                    {"revision", d.revision},
                    {"commit", d.commit},
                    {"include", d.include},
                    {"exclude", d.exclude}};
      break;
    }
    case ActionKind::kRemoveModel: {
      const RemoveModelStep& m = a.As<RemoveModelStep>();
      j["model"] = {{"repo_id", m.repo_id}, {"commit", m.commit}};
      break;
    }
    case ActionKind::kWaitHealthy: {
      const HealthStep& h = a.As<HealthStep>();
      j["health"] = {{"port", h.port},
                     {"path", h.path},
                     {"served_model_name", h.served_name},
                     {"timeout_ms", h.timeout_ms}};
      j["unit"] = a.unit;
      break;
    }
    case ActionKind::kPreflight: {
      const PreflightStep& p = a.As<PreflightStep>();
      j["preflight"] = {{"command", p.argv}, {"timeout_ms", p.timeout_ms}};
      if (a.reason == Reason::kEngineCheck)
        j["engine_check"] = {{"engine", p.engine},
                             {"check_program", p.check_program},
                             {"argv", p.argv},
                             {"environment", p.env},
                             {"environment_file", p.env_file}};
      j["unit"] = a.unit;
      break;
    }
    case ActionKind::kSmoke: {
      const SmokeStep& g = a.As<SmokeStep>();
      j["smoke"] = {{"port", g.port},
                    {"api", g.api},
                    {"served_model_name", g.served_name},
                    {"prompt", g.prompt},
                    {"max_tokens", g.max_tokens},
                    {"timeout_ms", g.timeout_ms}};
      j["unit"] = a.unit;
      break;
    }
    case ActionKind::kFloor: {
      const FloorStep& f = a.As<FloorStep>();
      ordered_json floor = {{"port", f.port},
                            {"served_model_name", f.served_name},
                            {"concurrency", f.concurrency},
                            {"duration_ms", f.duration_ms},
                            {"max_tokens", f.max_tokens},
                            {"prompt_tokens", f.prompt_tokens},
                            {"min_output_tokens_per_second", f.min_output_tps},
                            {"max_ttft_p50_ms", f.max_ttft_p50_ms},
                            {"max_ttft_p99_ms", f.max_ttft_p99_ms}};
      if (f.has_goodput())
        floor["goodput"] = {{"ttft_ms", f.goodput_ttft_ms},
                            {"tpot_ms", f.goodput_tpot_ms},
                            {"e2el_ms", f.goodput_e2el_ms},
                            {"min_rps", f.min_goodput_rps}};
      // The figures recorded earlier that the floor compares with when the reference is not
      // measured before the switch; null: none.
      if (f.relative())
        floor["relative"] = {
            {"reference_unit", f.reference_unit},
            {"output_tps", f.rel_output_tps},
            {"ttft_p50", f.rel_ttft_p50},
            {"ttft_p99", f.rel_ttft_p99},
            {"tpot_p50", f.rel_tpot_p50},
            {"goodput", f.rel_goodput},
            {"refuse_without_reference", f.refuse_without_reference},
            {"recorded", f.recorded.empty() ? ordered_json(nullptr) : ordered_json(f.recorded)}};
      j["floor"] = std::move(floor);
      j["unit"] = a.unit;
      break;
    }
    case ActionKind::kReference: {
      const FloorStep& f = a.As<FloorStep>();
      j["reference"] = {{"port", f.port},
                        {"served_model_name", f.served_name},
                        {"concurrency", f.concurrency},
                        {"duration_ms", f.duration_ms},
                        {"max_tokens", f.max_tokens},
                        {"prompt_tokens", f.prompt_tokens}};
      j["unit"] = a.unit;
      break;
    }
    case ActionKind::kSleep:
    case ActionKind::kWake: {
      const StandbyStep& st = a.As<StandbyStep>();
      j[a.kind == ActionKind::kSleep ? "sleep" : "wake"] = {{"host", st.host},
                                                            {"port", st.port},
                                                            {"level", st.level},
                                                            {"timeout_ms", st.timeout_ms},
                                                            {"gpus", st.gpus},
                                                            {"residual_bytes", st.residual_bytes},
                                                            {"memory_bytes", st.memory_bytes}};
      j["unit"] = a.unit;
      break;
    }
    case ActionKind::kPrewarm: {
      const PrewarmStep& p = a.As<PrewarmStep>();
      j["prewarm"] = {{"snapshot", p.snapshot}, {"bytes", p.bytes}, {"file", p.file}};
      j["unit"] = a.unit;
      break;
    }
    case ActionKind::kSoak: {
      const SoakStep& g = a.As<SoakStep>();
      j["soak"] = {{"port", g.port},
                   {"path", g.path},
                   {"duration_ms", g.duration_ms},
                   {"interval_ms", g.interval_ms},
                   {"max_restarts", g.max_restarts},
                   {"max_failed_probes", g.max_failed_probes},
                   {"max_error_rate", g.max_error_rate},
                   {"min_requests", g.min_requests},
                   {"front_socket", g.front_socket}};
      j["unit"] = a.unit;
      break;
    }
    case ActionKind::kDaemonReload:
      break;
    case ActionKind::kWriteFront:
    case ActionKind::kRoute:
    case ActionKind::kDrain:
    case ActionKind::kReady: {
      const FrontStep& f = a.As<FrontStep>();
      ordered_json front = {{"port", f.port},           {"server", f.server},
                            {"admin_socket", f.socket}, {"master_socket", f.master},
                            {"config", f.config},       {"reload", f.reload},
                            {"ready", f.ready},         {"timeout_ms", f.timeout_ms}};
      if (a.kind == ActionKind::kWriteFront) front["content"] = f.config_text;
      j["front"] = std::move(front);
      j["unit"] = a.unit;
      break;
    }
    case ActionKind::kWriteUnit:
      j["unit"] = a.unit;
      j["diff"] = UnitFileDiff(a);
      break;
    default:
      j["unit"] = a.unit;
  }
  if (const auto* svc = std::get_if<ServiceStep>(&a.step)) {
    if (!svc->for_service.empty()) j["for_service"] = svc->for_service;
    if (!svc->gpus.empty()) j["gpus"] = svc->gpus;
  }
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
    ordered_json x = {{"port", d.port},
                      {"from_step", d.from_step},
                      {"until_step", d.until_step},
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
                          {"health",
                           {{"port", r.gate.port},
                            {"path", r.gate.path},
                            {"served_model_name", r.gate.served_name},
                            {"timeout_ms", r.gate.timeout_ms}}}});
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
  for (const auto& p : plan.problems)
    problems.push_back({{"step", p.step},
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
