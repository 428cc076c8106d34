#include <algorithm>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_text.h"
#include "core/json_writer.h"
#include "core/observed.h"
#include "core/two_threads.h"
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

void WriteResources(JsonWriter& w, const Resources& r) {
  w.BeginObject()
      .Field("disk_bytes", r.disk_bytes)
      .Field("gpu_bytes", r.gpu_bytes)
      .Field("ports", r.ports)
      .EndObject();
}

// One entry of resource_changes (step i + 1).
void WriteAction(JsonWriter& w, const Action& a, size_t i) {
  w.BeginObject();
  w.Field("step", i + 1).Field("address", a.address).Field("action", ActionKindName(a.kind));
  w.Key("change").BeginObject().Key("actions").BeginArray().Value(TerraformAction(a));
  w.EndArray().EndObject();
  w.Field("action_reason", ReasonName(a.reason)).Field("detail", a.detail);
  w.Key("requires");
  WriteResources(w, a.requires_);
  w.Key("frees");
  WriteResources(w, a.frees);
  switch (a.kind) {
    case ActionKind::kDownload: {
      const DownloadStep& d = a.As<DownloadStep>();
      w.Key("model").BeginObject();
      w.Field("repo_id", d.repo_id).Field("revision", d.revision).Field("commit", d.commit);
      w.Field("include", d.include).Field("exclude", d.exclude).EndObject();
      break;
    }
    case ActionKind::kRemoveModel: {
      const RemoveModelStep& m = a.As<RemoveModelStep>();
      w.Key("model").BeginObject().Field("repo_id", m.repo_id).Field("commit", m.commit);
      w.EndObject();
      break;
    }
    case ActionKind::kWaitHealthy: {
      const HealthStep& h = a.As<HealthStep>();
      w.Key("health").BeginObject().Field("port", h.port).Field("path", h.path);
      w.Field("served_model_name", h.served_name).Field("timeout_ms", h.timeout_ms).EndObject();
      w.Field("unit", a.unit);
      break;
    }
    case ActionKind::kPreflight: {
      const PreflightStep& p = a.As<PreflightStep>();
      w.Key("preflight").BeginObject().Field("command", p.argv);
      w.Field("timeout_ms", p.timeout_ms).EndObject();
      if (a.reason == Reason::kEngineCheck) {
        w.Key("engine_check").BeginObject().Field("engine", p.engine);
        w.Field("check_program", p.check_program).Field("argv", p.argv);
        w.Field("environment", p.env).Field("environment_file", p.env_file).EndObject();
      }
      w.Field("unit", a.unit);
      break;
    }
    case ActionKind::kSmoke: {
      const SmokeStep& g = a.As<SmokeStep>();
      w.Key("smoke").BeginObject().Field("port", g.port).Field("api", g.api);
      w.Field("served_model_name", g.served_name).Field("prompt", g.prompt);
      w.Field("max_tokens", g.max_tokens).Field("timeout_ms", g.timeout_ms).EndObject();
      w.Field("unit", a.unit);
      break;
    }
    case ActionKind::kFloor: {
      const FloorStep& f = a.As<FloorStep>();
      w.Key("floor").BeginObject().Field("port", f.port);
      w.Field("served_model_name", f.served_name).Field("concurrency", f.concurrency);
      w.Field("duration_ms", f.duration_ms).Field("max_tokens", f.max_tokens);
      w.Field("prompt_tokens", f.prompt_tokens);
      w.Field("min_output_tokens_per_second", f.min_output_tps);
      w.Field("max_ttft_p50_ms", f.max_ttft_p50_ms).Field("max_ttft_p99_ms", f.max_ttft_p99_ms);
      if (f.has_goodput()) {
        w.Key("goodput").BeginObject().Field("ttft_ms", f.goodput_ttft_ms);
        w.Field("tpot_ms", f.goodput_tpot_ms).Field("e2el_ms", f.goodput_e2el_ms);
        w.Field("min_rps", f.min_goodput_rps).EndObject();
      }
      if (f.relative()) {
        w.Key("relative").BeginObject().Field("reference_unit", f.reference_unit);
        w.Field("output_tps", f.rel_output_tps).Field("ttft_p50", f.rel_ttft_p50);
        w.Field("ttft_p99", f.rel_ttft_p99).Field("tpot_p50", f.rel_tpot_p50);
        w.Field("goodput", f.rel_goodput);
        w.Field("refuse_without_reference", f.refuse_without_reference);
        // The figures recorded earlier that the floor compares with when the reference is
        // not measured before the switch; null: none.
        w.Key("recorded");
        if (f.recorded.empty())
          w.Value(nullptr);
        else
          w.Value(ordered_json(f.recorded));
        w.EndObject();
      }
      w.EndObject().Field("unit", a.unit);
      break;
    }
    case ActionKind::kReference: {
      const FloorStep& f = a.As<FloorStep>();
      w.Key("reference").BeginObject().Field("port", f.port);
      w.Field("served_model_name", f.served_name).Field("concurrency", f.concurrency);
      w.Field("duration_ms", f.duration_ms).Field("max_tokens", f.max_tokens);
      w.Field("prompt_tokens", f.prompt_tokens).EndObject();
      w.Field("unit", a.unit);
      break;
    }
    case ActionKind::kSleep:
    case ActionKind::kWake: {
      const StandbyStep& st = a.As<StandbyStep>();
      w.Key(a.kind == ActionKind::kSleep ? "sleep" : "wake").BeginObject();
      w.Field("host", st.host).Field("port", st.port).Field("level", st.level);
      w.Field("timeout_ms", st.timeout_ms).Field("gpus", st.gpus);
      w.Field("residual_bytes", st.residual_bytes).Field("memory_bytes", st.memory_bytes);
      w.EndObject().Field("unit", a.unit);
      break;
    }
    case ActionKind::kPrewarm: {
      const PrewarmStep& p = a.As<PrewarmStep>();
      w.Key("prewarm").BeginObject().Field("snapshot", p.snapshot).Field("bytes", p.bytes);
      w.Field("file", p.file);
      w.EndObject().Field("unit", a.unit);
      break;
    }
    case ActionKind::kSoak: {
      const SoakStep& g = a.As<SoakStep>();
      w.Key("soak").BeginObject().Field("port", g.port).Field("path", g.path);
      w.Field("duration_ms", g.duration_ms).Field("interval_ms", g.interval_ms);
      w.Field("max_restarts", g.max_restarts).Field("max_failed_probes", g.max_failed_probes);
      w.Field("max_error_rate", g.max_error_rate).Field("min_requests", g.min_requests);
      w.Field("front_socket", g.front_socket).EndObject();
      w.Field("unit", a.unit);
      break;
    }
    case ActionKind::kDaemonReload:
      break;
    case ActionKind::kWriteFront:
    case ActionKind::kRoute:
    case ActionKind::kDrain:
    case ActionKind::kReady: {
      const FrontStep& f = a.As<FrontStep>();
      w.Key("front").BeginObject().Field("port", f.port).Field("server", f.server);
      w.Field("admin_socket", f.socket).Field("master_socket", f.master);
      w.Field("config", f.config).Field("reload", f.reload).Field("ready", f.ready);
      w.Field("timeout_ms", f.timeout_ms);
      if (a.kind == ActionKind::kWriteFront) w.Field("content", f.config_text);
      w.EndObject().Field("unit", a.unit);
      break;
    }
    case ActionKind::kWriteUnit:
      w.Field("unit", a.unit).Field("diff", UnitFileDiff(a));
      break;
    default:
      w.Field("unit", a.unit);
  }
  if (const auto* svc = std::get_if<ServiceStep>(&a.step)) {
    if (!svc->for_service.empty()) w.Field("for_service", svc->for_service);
    if (!svc->gpus.empty()) w.Field("gpus", svc->gpus);
  }
  w.EndObject();
}

}  // namespace

std::string PlanToJson(const Plan& plan, const Desired& desired) {
  std::ostringstream out;
  WritePlanJson(out, plan, desired);
  return out.str();
}

void WritePlanJson(std::ostream& out, const Plan& plan, const Desired& desired) {
  std::string text;
  JsonWriter w(&text);
  w.BeginObject();
  w.Field("format_version", Plan::kFormatVersion).Field("berth_version", BERTH_VERSION);
  w.Field("host", plan.host);
  w.Key("manifest").BeginObject().Field("digest", desired.digest);
  w.Field("files", desired.files).EndObject();
  const char* status = !plan.host_matches ? "not_applicable"
                       : plan.blocked()   ? "blocked"
                       : plan.empty()     ? "no_changes"
                                          : "changes";
  w.Field("status", status).Field("applies_to_host", plan.host_matches);
  if (!plan.host_matches) w.Field("skip_reason", plan.skip_reason);
  w.Key("resource_changes").BeginArray();
  // The actions are written on two threads, a batch at a time (a bounded text held at once),
  // each half into a text of its own, written out in order: most of a JSON plan of many
  // services is these, and each depends on its action alone.
  constexpr size_t kBatch = 256, kWorthAThread = 64;
  std::string halves[2];
  auto flush = [&out](std::string& part) {
    out.write(part.data(), static_cast<std::streamsize>(part.size()));
    part.clear();
  };
  flush(text);
  for (size_t from = 0; from < plan.actions.size(); from += kBatch) {
    size_t to = std::min(from + kBatch, plan.actions.size()), split = from + (to - from) / 2;
    auto make = [&](size_t first, size_t last) {
      std::string* into = &halves[first == split && first != from ? 1 : 0];
      JsonWriter part = JsonWriter::InArray(into, 1, first == 0);
      for (size_t i = first; i < last; ++i) WriteAction(part, plan.actions[i], i);
    };
    SplitOverTwoThreads(from, split, to, true, kWorthAThread, make);
    flush(halves[0]);
    flush(halves[1]);
  }
  // The parts wrote the items; this writer closes the array.
  w.ItemsWrittenElsewhere(!plan.actions.empty()).EndArray();
  w.Key("unchanged").BeginArray();
  for (const auto& n : plan.notes) {
    w.BeginObject().Field("address", n.address).Field("detail", n.detail);
    if (n.verb != "keep") w.Field("verb", n.verb);
    w.EndObject();
  }
  w.EndArray();
  w.Key("disruption").BeginArray();
  for (const auto& d : plan.disruptions) {
    w.BeginObject().Field("port", d.port).Field("from_step", d.from_step);
    w.Field("until_step", d.until_step).Field("service", d.service).Field("reason", d.reason);
    // Behind a front: "held" (requests wait, up to hold_ms) or "none" (make-before-break).
    if (!d.front_mode.empty()) {
      w.Field("front", d.front_mode);
      if (d.front_mode == "held") w.Field("hold_ms", d.hold_ms);
    }
    // The estimate (planners/dark_windows.h): null and [] when nothing estimates it.
    const DarkEstimate& e = d.estimate;
    w.Field("expected_ms", e.expected_ms);
    w.Key("worst_ms");
    if (e.gate_unit.empty())
      w.Value(nullptr);
    else
      w.Value(e.worst_ms);
    w.Field("samples", e.samples_ms);
    if (!e.gate_unit.empty()) w.Field("samples_unit", e.gate_unit);
    // The stop or restart that begins it: its recorded stops, its timeout (null: not known;
    // "infinity": systemd never times it out).
    if (!e.gate_unit.empty() && !e.stop_unit.empty()) {
      w.Key("stop").BeginObject().Field("unit", e.stop_unit).Field("samples", e.stop_samples_ms);
      w.Key("timeout_ms");
      if (e.stop_timeout_ms == ObservedUnit::kNoStopTimeout)
        w.Value("infinity");
      else if (e.stop_timeout_ms == 0)
        w.Value(nullptr);
      else
        w.Value(e.stop_timeout_ms);
      w.EndObject();
    }
    if (!d.caveat.empty()) w.Field("caveat", d.caveat);
    w.EndObject();
  }
  w.EndArray();
  // Each switch as the planner stated it; steps 1-based, like the rest of this form.
  auto steps = [&w](const char* key, const std::vector<size_t>& v) {
    w.Key(key).BeginArray();
    for (size_t i : v) w.Value(i + 1);
    w.EndArray();
  };
  w.Key("switches").BeginArray();
  for (const Switch& sw : plan.switches) {
    w.BeginObject().Field("address", sw.address).Field("unit", sw.unit);
    w.Field("mode", SwitchModeName(sw.mode));
    steps("steps", sw.steps);
    w.Field("start", sw.start + 1);
    steps("gates", sw.gates);
    w.Key("replaces").BeginArray();
    for (const Replaced& r : sw.replaces) {
      w.BeginObject().Field("address", r.address).Field("unit", r.unit);
      w.Field("stop_step", r.stop_step + 1);
      w.Key("health").BeginObject().Field("port", r.gate.port).Field("path", r.gate.path);
      w.Field("served_model_name", r.gate.served_name).Field("timeout_ms", r.gate.timeout_ms);
      w.EndObject().EndObject();
    }
    w.EndArray();
    w.Field("restores_unit", sw.restores_unit).Field("needs_turn", sw.needs_turn);
    w.Field("group", sw.group);
    // Behind a front: its public port, the backend port, and where the undo routes back.
    if (sw.front_port) {
      w.Key("front").BeginObject().Field("port", sw.front_port);
      w.Field("backend_port", sw.backend_port).Field("undo_route", sw.undo_route).EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("feasibility").BeginObject().Field("feasible", !plan.blocked());
  w.Key("disk").BeginObject().Field("needed_bytes", plan.disk_needed);
  w.Field("free_bytes", plan.disk_free).Field("reserve_bytes", plan.disk_reserve);
  w.Field("sizes_known", plan.disk_known).EndObject();
  w.Key("problems").BeginArray();
  for (const auto& p : plan.problems) {
    w.BeginObject().Field("step", p.step).Field("resource", p.resource);
    w.Field("message", p.message).Field("needed", p.needed).Field("available", p.available);
    w.EndObject();
  }
  w.EndArray().EndObject();
  w.Field("warnings", plan.warnings);
  w.EndObject();
  text += "\n";
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
}

}  // namespace berth
