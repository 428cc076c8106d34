#include <algorithm>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_text.h"
#include "core/two_threads.h"
#include "engine/output/plan_output.h"

namespace berth {
namespace {

using nlohmann::ordered_json;

// Terraform's vocabulary for what an action does to its resource.
ordered_json TerraformActions(const Action& a) {
  switch (a.kind) {
    case ActionKind::kDownload:
      return {"create"};
    case ActionKind::kWriteUnit:
      return {a.reason == Reason::kUnitMissing ? "create" : "update"};
    case ActionKind::kRemoveModel:
    case ActionKind::kRemoveUnit:
      return {"delete"};
    case ActionKind::kWaitHealthy:
    case ActionKind::kPreflight:
    case ActionKind::kSmoke:
    case ActionKind::kFloor:
    case ActionKind::kSoak:
    case ActionKind::kReference:
    case ActionKind::kDrain:
    case ActionKind::kPrewarm:
      return {"read"};
    default:
      return {"update"};
  }
}

ordered_json ResourcesJson(const Resources& r) {
  ordered_json gpus = ordered_json::object();
  for (const auto& [i, b] : r.gpu_bytes) gpus[std::to_string(i)] = b;
  return {{"disk_bytes", r.disk_bytes}, {"gpu_bytes", gpus}, {"ports", r.ports}};
}

// Writes a JSON object member by member, each value dumped on its own, in exactly the text one
// dump of the whole object with indent 2 gives: a plan of 10,000 services is 37 MB of JSON, and
// one document of it held 150 MB more.
class ObjectWriter {
 public:
  explicit ObjectWriter(std::ostream& out) : out_(out) { out_ << "{"; }

  // Every member of `object`, in its order.
  void Members(const ordered_json& object) {
    for (auto it = object.begin(); it != object.end(); ++it) Member(it.key(), *it);
  }
  void Member(const std::string& key, const ordered_json& value) {
    Key(key);
    Indented(DumpJson(value, 2), 1);
  }
  // A member whose value is an array written item by item: Key, then Item for each, then
  // EndArray.
  void Key(const std::string& key) {
    out_ << (first_ ? "\n  " : ",\n  ") << DumpJson(ordered_json(key)) << ": ";
    first_ = false;
    first_item_ = true;
  }
  void Item(const ordered_json& value) { RawItem(ItemText(value)); }
  /// An array item's text as Item writes it (without what comes before it): made apart from
  /// the writer, on any thread.
  static std::string ItemText(const ordered_json& value) {
    std::ostringstream text;
    Indented(text, DumpJson(value, 2), 2);
    return text.str();
  }
  void RawItem(const std::string& text) {
    out_ << (first_item_ ? "[\n    " : ",\n    ");
    first_item_ = false;
    out_ << text;
  }
  void EndArray() { out_ << (first_item_ ? "[]" : "\n  ]"); }
  void End() { out_ << (first_ ? "}" : "\n}"); }

 private:
  // `text` (dumped at the top level) as it reads `depth` levels down: its newlines (never in a
  // string, where JSON escapes them) are followed by two spaces per level.
  void Indented(const std::string& text, int depth) { Indented(out_, text, depth); }
  static void Indented(std::ostream& out, const std::string& text, int depth) {
    size_t start = 0;
    for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
      out.write(text.data() + start, static_cast<std::streamsize>(nl + 1 - start));
      for (int i = 0; i < depth; ++i) out << "  ";
    }
    out.write(text.data() + start, static_cast<std::streamsize>(text.size() - start));
  }

  std::ostream& out_;
  bool first_ = true;
  bool first_item_ = true;
};

// One entry of resource_changes (step i + 1).
ordered_json ActionJson(const Action& a, size_t i) {
  ordered_json c;
  c["step"] = i + 1;
  c["address"] = a.address;
  c["action"] = ActionKindName(a.kind);
  c["change"] = {{"actions", TerraformActions(a)}};
  c["action_reason"] = ReasonName(a.reason);
  c["detail"] = a.detail;
  c["requires"] = ResourcesJson(a.requires_);
  c["frees"] = ResourcesJson(a.frees);
  switch (a.kind) {
    case ActionKind::kDownload: {
      const DownloadStep& d = a.As<DownloadStep>();
      c["model"] = {{"repo_id", d.repo_id},
                    {"revision", d.revision},
                    {"commit", d.commit},
                    {"include", d.include},
                    {"exclude", d.exclude}};
      break;
    }
    case ActionKind::kRemoveModel: {
      const RemoveModelStep& m = a.As<RemoveModelStep>();
      c["model"] = {{"repo_id", m.repo_id}, {"commit", m.commit}};
      break;
    }
    case ActionKind::kWaitHealthy: {
      const HealthStep& h = a.As<HealthStep>();
      c["health"] = {{"port", h.port},
                     {"path", h.path},
                     {"served_model_name", h.served_name},
                     {"timeout_ms", h.timeout_ms}};
      c["unit"] = a.unit;
      break;
    }
    case ActionKind::kPreflight: {
      const PreflightStep& p = a.As<PreflightStep>();
      c["preflight"] = {{"command", p.argv}, {"timeout_ms", p.timeout_ms}};
      if (a.reason == Reason::kEngineCheck)
        c["engine_check"] = {{"engine", p.engine},
                             {"check_program", p.check_program},
                             {"argv", p.argv},
                             {"environment", p.env},
                             {"environment_file", p.env_file}};
      c["unit"] = a.unit;
      break;
    }
    case ActionKind::kSmoke: {
      const SmokeStep& g = a.As<SmokeStep>();
      c["smoke"] = {{"port", g.port},
                    {"api", g.api},
                    {"served_model_name", g.served_name},
                    {"prompt", g.prompt},
                    {"max_tokens", g.max_tokens},
                    {"timeout_ms", g.timeout_ms}};
      c["unit"] = a.unit;
      break;
    }
    case ActionKind::kFloor: {
      const FloorStep& f = a.As<FloorStep>();
      c["floor"] = {{"port", f.port},
                    {"served_model_name", f.served_name},
                    {"concurrency", f.concurrency},
                    {"duration_ms", f.duration_ms},
                    {"max_tokens", f.max_tokens},
                    {"prompt_tokens", f.prompt_tokens},
                    {"min_output_tokens_per_second", f.min_output_tps},
                    {"max_ttft_p50_ms", f.max_ttft_p50_ms},
                    {"max_ttft_p99_ms", f.max_ttft_p99_ms}};
      if (f.has_goodput())
        c["floor"]["goodput"] = {{"ttft_ms", f.goodput_ttft_ms},
                                 {"tpot_ms", f.goodput_tpot_ms},
                                 {"e2el_ms", f.goodput_e2el_ms},
                                 {"min_rps", f.min_goodput_rps}};
      if (f.relative()) {
        c["floor"]["relative"] = {{"reference_unit", f.reference_unit},
                                  {"output_tps", f.rel_output_tps},
                                  {"ttft_p50", f.rel_ttft_p50},
                                  {"ttft_p99", f.rel_ttft_p99},
                                  {"tpot_p50", f.rel_tpot_p50},
                                  {"goodput", f.rel_goodput},
                                  {"refuse_without_reference", f.refuse_without_reference}};
        // The figures recorded earlier that the floor compares with when the reference is
        // not measured before the switch; null: none.
        c["floor"]["relative"]["recorded"] = nullptr;
        if (!f.recorded.empty()) c["floor"]["relative"]["recorded"] = f.recorded;
      }
      c["unit"] = a.unit;
      break;
    }
    case ActionKind::kReference: {
      const FloorStep& f = a.As<FloorStep>();
      c["reference"] = {{"port", f.port},
                        {"served_model_name", f.served_name},
                        {"concurrency", f.concurrency},
                        {"duration_ms", f.duration_ms},
                        {"max_tokens", f.max_tokens},
                        {"prompt_tokens", f.prompt_tokens}};
      c["unit"] = a.unit;
      break;
    }
    case ActionKind::kSleep:
    case ActionKind::kWake: {
      const StandbyStep& st = a.As<StandbyStep>();
      c[a.kind == ActionKind::kSleep ? "sleep" : "wake"] = {{"host", st.host},
                                                            {"port", st.port},
                                                            {"level", st.level},
                                                            {"timeout_ms", st.timeout_ms},
                                                            {"gpus", st.gpus},
                                                            {"residual_bytes", st.residual_bytes},
                                                            {"memory_bytes", st.memory_bytes}};
      c["unit"] = a.unit;
      break;
    }
    case ActionKind::kPrewarm: {
      const PrewarmStep& p = a.As<PrewarmStep>();
      c["prewarm"] = {{"snapshot", p.snapshot}, {"bytes", p.bytes}};
      c["unit"] = a.unit;
      break;
    }
    case ActionKind::kSoak: {
      const SoakStep& g = a.As<SoakStep>();
      c["soak"] = {{"port", g.port},
                   {"path", g.path},
                   {"duration_ms", g.duration_ms},
                   {"interval_ms", g.interval_ms},
                   {"max_restarts", g.max_restarts},
                   {"max_failed_probes", g.max_failed_probes},
                   {"max_error_rate", g.max_error_rate},
                   {"min_requests", g.min_requests},
                   {"front_socket", g.front_socket}};
      c["unit"] = a.unit;
      break;
    }
    case ActionKind::kDaemonReload:
      break;
    case ActionKind::kWriteFront:
    case ActionKind::kRoute:
    case ActionKind::kDrain:
    case ActionKind::kReady: {
      const FrontStep& f = a.As<FrontStep>();
      c["front"] = {{"port", f.port},           {"server", f.server},
                    {"admin_socket", f.socket}, {"master_socket", f.master},
                    {"config", f.config},       {"reload", f.reload},
                    {"ready", f.ready},         {"timeout_ms", f.timeout_ms}};
      if (a.kind == ActionKind::kWriteFront) c["front"]["content"] = f.config_text;
      c["unit"] = a.unit;
      break;
    }
    case ActionKind::kWriteUnit:
      c["unit"] = a.unit;
      c["diff"] = UnitFileDiff(a);
      break;
    default:
      c["unit"] = a.unit;
  }
  if (const auto* svc = std::get_if<ServiceStep>(&a.step)) {
    if (!svc->for_service.empty()) c["for_service"] = svc->for_service;
    if (!svc->gpus.empty()) c["gpus"] = svc->gpus;
  }
  return c;
}

}  // namespace

std::string PlanToJson(const Plan& plan, const Desired& desired) {
  std::ostringstream out;
  WritePlanJson(out, plan, desired);
  return out.str();
}

void WritePlanJson(std::ostream& out, const Plan& plan, const Desired& desired) {
  ObjectWriter w(out);
  ordered_json j;
  j["format_version"] = Plan::kFormatVersion;
  j["berth_version"] = BERTH_VERSION;
  j["host"] = plan.host;
  j["manifest"] = {{"digest", desired.digest}, {"files", desired.files}};
  std::string status = !plan.host_matches ? "not_applicable"
                       : plan.blocked()   ? "blocked"
                       : plan.empty()     ? "no_changes"
                                          : "changes";
  j["status"] = status;
  j["applies_to_host"] = plan.host_matches;
  if (!plan.host_matches) j["skip_reason"] = plan.skip_reason;
  w.Members(j);
  j = ordered_json::object();  // the members after resource_changes
  w.Key("resource_changes");
  // Each action's text is made on two threads, a batch at a time (a bounded number of texts
  // held at once), and written in order: it is most of the time of a JSON plan of many
  // services, and each depends on its action alone.
  constexpr size_t kBatch = 1024, kWorthAThread = 64;
  std::vector<std::string> texts;
  for (size_t from = 0; from < plan.actions.size(); from += kBatch) {
    size_t to = std::min(from + kBatch, plan.actions.size());
    texts.assign(to - from, std::string());
    auto make = [&](size_t first, size_t last) {
      for (size_t i = first; i < last; ++i)
        texts[i - from] = ObjectWriter::ItemText(ActionJson(plan.actions[i], i));
    };
    SplitOverTwoThreads(from, from + (to - from) / 2, to, true, kWorthAThread, make);
    for (const std::string& t : texts) w.RawItem(t);
  }
  w.EndArray();
  ordered_json unchanged = ordered_json::array();
  for (const auto& n : plan.notes)
    if (n.verb == "keep")
      unchanged.push_back({{"address", n.address}, {"detail", n.detail}});
    else
      unchanged.push_back({{"address", n.address}, {"detail", n.detail}, {"verb", n.verb}});
  j["unchanged"] = std::move(unchanged);
  ordered_json dis = ordered_json::array();
  for (const auto& d : plan.disruptions) {
    dis.push_back({{"port", d.port},
                   {"from_step", d.from_step},
                   {"until_step", d.until_step},
                   {"service", d.service},
                   {"reason", d.reason}});
    // Behind a front: "held" (requests wait, up to hold_ms) or "none" (make-before-break).
    if (!d.front_mode.empty()) {
      dis.back()["front"] = d.front_mode;
      if (d.front_mode == "held") dis.back()["hold_ms"] = d.hold_ms;
    }
    // The estimate (planners/dark_windows.h): null and [] when nothing estimates it.
    const DarkEstimate& e = d.estimate;
    ordered_json& entry = dis.back();
    entry["expected_ms"] = e.expected_ms ? ordered_json(*e.expected_ms) : ordered_json(nullptr);
    entry["worst_ms"] = e.gate_unit.empty() ? ordered_json(nullptr) : ordered_json(e.worst_ms);
    entry["samples"] = e.samples_ms;
    if (!e.gate_unit.empty()) entry["samples_unit"] = e.gate_unit;
    if (!d.caveat.empty()) entry["caveat"] = d.caveat;
  }
  j["disruption"] = std::move(dis);
  // Each switch as the planner stated it; steps 1-based, like the rest of this form.
  ordered_json switches = ordered_json::array();
  auto steps = [](const std::vector<size_t>& v) {
    std::vector<size_t> one_based;
    for (size_t i : v) one_based.push_back(i + 1);
    return one_based;
  };
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
    switches.push_back({{"address", sw.address},
                        {"unit", sw.unit},
                        {"mode", SwitchModeName(sw.mode)},
                        {"steps", steps(sw.steps)},
                        {"start", sw.start + 1},
                        {"gates", steps(sw.gates)},
                        {"replaces", std::move(replaces)},
                        {"restores_unit", sw.restores_unit},
                        {"needs_turn", sw.needs_turn},
                        {"group", sw.group}});
    // Behind a front: its public port, the backend port, and where the undo routes back.
    if (sw.front_port)
      switches.back()["front"] = {{"port", sw.front_port},
                                  {"backend_port", sw.backend_port},
                                  {"undo_route", sw.undo_route}};
  }
  j["switches"] = std::move(switches);
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
  // A unit file's diff carries text berth did not write: bytes that are not UTF-8 (which the
  // observation does not keep, but a hand edit of berth's own file may hold) become "\\xNN".
  w.Members(j);
  w.End();
  out << "\n";
}

}  // namespace berth
