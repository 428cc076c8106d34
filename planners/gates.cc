#include "planners/gates.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

#include "core/hf_cache.h"
#include "core/units.h"
#include "planners/fronts.h"
#include "planners/servers/adapter.h"
#include "planners/unit_diff.h"

namespace berth {

std::string GateServedName(const ServiceSpec& s, const ReportedNames& names) {
  // A state-only service's served name is not known: its health path alone says it serves.
  if (!s.has_engine) return "";
  auto it = names.find(s.name);
  if (it != names.end()) return it->second;
  return AdapterFor(s.engine).ReportedName(s, RenderContext{});
}

namespace {

// What a request names: the reported name, else (engine: command without served_name) the
// service's own name, as before there was a served_name.
std::string RequestModel(const ServiceSpec& s, const ReportedNames& names) {
  std::string name = GateServedName(s, names);
  return name.empty() ? s.ServedName() : name;
}

}  // namespace

Action HealthGate(const ServiceSpec& s, const std::string& address, const ReportedNames& names,
                  std::string detail) {
  Action w = MakeAction(ActionKind::kWaitHealthy, address, Reason::kHealthGate);
  w.unit = s.UnitName();
  HealthStep& h = w.As<HealthStep>();
  h.path = s.health.path;
  h.port = s.port.value_or(0);
  h.host = s.DialHost();
  h.served_name = GateServedName(s, names);
  h.timeout_ms = s.health.timeout_ms;
  h.interval_ms = s.health.interval_ms;
  std::string models = " and /v1/models lists '" + h.served_name + "'";
  if (h.served_name.empty())
    models = s.has_engine && s.engine == EngineKind::kCommand
                 ? " (the health path alone: served_name does not say which model it lists)"
                 : "";
  w.detail = detail.empty() ? "GET " + s.health.path + " until 200" + models + " (timeout " +
                                  FormatDurationMs(s.health.timeout_ms) + ")"
                            : std::move(detail);
  return w;
}

std::vector<Action> GatesAfterHealth(const HostSpec& host, const ServiceSpec& s,
                                     const std::string& address, const ReportedNames& names) {
  std::vector<Action> out;
  if (!s.port || !s.has_engine) return out;
  if (const std::optional<SmokeSpec>& smoke = s.gates.smoke) {
    Action a = MakeAction(ActionKind::kSmoke, address, Reason::kSmokeGate);
    a.unit = s.UnitName();
    SmokeStep& g = a.As<SmokeStep>();
    g.port = *s.port;
    g.host = s.DialHost();
    g.served_name = RequestModel(s, names);
    g.api = smoke->api;
    g.prompt = smoke->prompt;
    g.max_tokens = smoke->max_tokens;
    g.timeout_ms = smoke->timeout_ms;
    std::string prompt = g.prompt.size() > 40 ? g.prompt.substr(0, 40) + "..." : g.prompt;
    a.detail = std::string("POST /v1/") + (g.api == "chat" ? "chat/completions" : "completions") +
               " for '" + g.served_name + "' (prompt '" + prompt + "', max_tokens " +
               std::to_string(g.max_tokens) + ") must return text within " +
               FormatDurationMs(g.timeout_ms);
    out.push_back(a);
  }
  if (const std::optional<FloorSpec>& floor = s.gates.floor) {
    Action a = MakeAction(ActionKind::kFloor, address, Reason::kFloorGate);
    a.unit = s.UnitName();
    FloorStep& g = a.As<FloorStep>();
    g.port = *s.port;
    g.host = s.DialHost();
    g.served_name = RequestModel(s, names);
    g.concurrency = floor->concurrency;
    g.duration_ms = floor->duration_ms;
    g.max_tokens = floor->max_tokens;
    g.prompt_tokens = floor->prompt_tokens;
    g.min_output_tps = floor->output_tps;
    g.max_ttft_p50_ms = floor->ttft_p50_ms;
    g.max_ttft_p99_ms = floor->ttft_p99_ms;
    g.rel_output_tps = floor->rel_output_tps;
    g.rel_ttft_p50 = floor->rel_ttft_p50;
    g.rel_ttft_p99 = floor->rel_ttft_p99;
    g.rel_tpot_p50 = floor->rel_tpot_p50;
    g.rel_goodput = floor->rel_goodput;
    g.goodput_ttft_ms = floor->goodput_ttft_ms;
    g.goodput_tpot_ms = floor->goodput_tpot_ms;
    g.goodput_e2el_ms = floor->goodput_e2el_ms;
    g.min_goodput_rps = floor->min_goodput_rps;
    g.refuse_without_reference = floor->refuse_without_reference;
    std::string want;
    auto add = [&](const std::string& w) { want += (want.empty() ? "" : ", ") + w; };
    if (g.min_output_tps > 0) add("at least " + FormatDouble(g.min_output_tps) + " output tok/s");
    if (g.max_ttft_p50_ms) add("TTFT p50 at most " + FormatDurationMs(g.max_ttft_p50_ms));
    if (g.max_ttft_p99_ms) add("TTFT p99 at most " + FormatDurationMs(g.max_ttft_p99_ms));
    if (g.rel_output_tps > 0)
      add("output tok/s at least " + FormatDouble(g.rel_output_tps) + "x the reference's");
    if (g.rel_ttft_p50 > 0)
      add("TTFT p50 at most " + FormatDouble(g.rel_ttft_p50) + "x the reference's");
    if (g.rel_ttft_p99 > 0)
      add("TTFT p99 at most " + FormatDouble(g.rel_ttft_p99) + "x the reference's");
    if (g.rel_tpot_p50 > 0)
      add("TPOT p50 at most " + FormatDouble(g.rel_tpot_p50) + "x the reference's");
    if (g.min_goodput_rps > 0)
      add("goodput at least " + FormatDouble(g.min_goodput_rps) + " req/s");
    if (g.rel_goodput > 0)
      add("goodput at least " + FormatDouble(g.rel_goodput) + "x the reference's");
    if (g.has_goodput()) {
      std::string good;
      auto limit = [&](const char* name, uint64_t ms) {
        if (!ms) return;
        if (!good.empty()) good += ", ";
        good += name;
        good += " at most ";
        good += FormatDurationMs(ms);
      };
      limit("TTFT", g.goodput_ttft_ms);
      limit("TPOT", g.goodput_tpot_ms);
      limit("E2E latency", g.goodput_e2el_ms);
      add("a good request: " + good);
    }
    a.detail = std::to_string(g.concurrency) + " streamed requests for " +
               FormatDurationMs(g.duration_ms) + " (max_tokens " + std::to_string(g.max_tokens) +
               "): " + want;
    out.push_back(a);
  }
  if (const std::optional<SoakSpec>& soak = s.gates.soak) {
    Action a = MakeAction(ActionKind::kSoak, address, Reason::kSoakGate);
    a.unit = s.UnitName();
    SoakStep& g = a.As<SoakStep>();
    g.host = s.DialHost();
    g.port = *s.port;
    g.path = s.health.path;
    g.served_name = GateServedName(s, names);
    g.duration_ms = soak->duration_ms;
    g.interval_ms = soak->interval_ms;
    g.max_restarts = soak->max_restarts;
    g.max_failed_probes = soak->max_failed_probes;
    g.max_error_rate = soak->max_error_rate;
    g.min_requests = soak->min_requests;
    if (s.front_port) {
      g.front_socket = FrontSocketPath(host, s.front_port);
      g.front_server = s.name;
    }
    a.detail = "watched for " + FormatDurationMs(g.duration_ms) + ": at most " +
               std::to_string(g.max_restarts) + " restart" + (g.max_restarts == 1 ? "" : "s") +
               ", its health path answering (at most " + std::to_string(g.max_failed_probes) +
               " failed probes in a row, one every " + FormatDurationMs(g.interval_ms) + ")" +
               (s.front_port ? ", at most " + FormatDouble(g.max_error_rate * 100) +
                                   "% of the front's requests to it answered 5xx"
                             : std::string());
    out.push_back(a);
  }
  return out;
}

void InsertActions(Plan* plan, size_t at, const std::vector<Action>& steps) {
  plan->actions.insert(plan->actions.begin() + static_cast<std::ptrdiff_t>(at), steps.begin(),
                       steps.end());
  const size_t n = steps.size();
  auto shift = [&](size_t& i) {
    if (i >= at) i += n;
  };
  for (Disruption& d : plan->disruptions) {
    shift(d.from_step);
    if (d.until_step) shift(*d.until_step);
    for (size_t& i : d.unknown_port_starts) shift(i);
  }
  for (Problem& p : plan->problems)
    if (p.step) shift(*p.step);
  for (Switch& sw : plan->switches) {
    for (size_t& i : sw.steps) shift(i);
    for (size_t& i : sw.gates) shift(i);
    for (Replaced& r : sw.replaces) shift(r.stop_step);
    shift(sw.start);
    if (sw.health_gate) shift(*sw.health_gate);
  }
}

namespace {

// The model commit a unit's snapshot path names ("" when none does).
std::string SnapshotCommit(const std::string& content) {
  static constexpr std::string_view kSnapshots = "/snapshots/";
  for (size_t at = content.find(kSnapshots); at != std::string::npos;
       at = content.find(kSnapshots, at + 1)) {
    std::string commit = content.substr(at + kSnapshots.size(), 40);
    if (IsCommit(commit)) return commit;
  }
  return "";
}

// The settings `unit` runs with now: what berth recorded starting the running process with
// (its RestartDigest), else that of its unit file; "" when berth cannot tell.
std::string RunningSettings(const PlanIndex& index, const std::string& unit) {
  const Observed& o = index.observed();
  const ObservedUnit* u = index.Unit(unit);
  if (!u || !index.Owns(*u)) return "";
  auto started = o.state.started.find(unit);
  if (started != o.state.started.end() && !u->invocation_id.empty() &&
      started->second.first == u->invocation_id &&
      started->second.second.starts_with("restart-keys:"))
    return started->second.second;
  return u->content.empty() ? "" : RestartDigest(u->content);
}

// The load a floor runs, as recorded figures name it.
GateFigures LoadOf(const FloorStep& g) {
  GateFigures load;
  load.concurrency = g.concurrency;
  load.max_tokens = g.max_tokens;
  load.prompt_tokens = g.prompt_tokens;
  load.goodput_ttft_ms = g.goodput_ttft_ms;
  load.goodput_tpot_ms = g.goodput_tpot_ms;
  load.goodput_e2el_ms = g.goodput_e2el_ms;
  return load;
}

}  // namespace

void ApplyRelativeFloors(const Desired& desired, const PlanIndex& index, Plan* plan) {
  const Observed& observed = index.observed();
  std::set<std::string> written;  // the units whose file the plan writes
  for (const Action& a : plan->actions)
    if (a.kind == ActionKind::kWriteUnit) written.insert(a.unit);
  for (size_t k = 0; k < plan->switches.size(); ++k) {
    const Switch& sw = plan->switches[k];
    auto floor_at = std::find_if(sw.gates.begin(), sw.gates.end(), [&](size_t i) {
      return plan->actions[i].kind == ActionKind::kFloor;
    });
    if (floor_at == sw.gates.end()) continue;
    size_t floor_step = *floor_at;
    const FloorStep& g = plan->actions[floor_step].As<FloorStep>();
    if (!g.relative()) continue;
    // The service it replaces: the first one stopped for it. Serving before the switch's first
    // step, it is measured then when berth knows its address; else (it does not serve, or berth
    // knows no port of it) its recorded figures stand in. An in-place restart compares with the
    // unit as it runs now, on the port and served name of the floor; a start of a service that
    // does not run compares with what it recorded with the settings its unit has now.
    std::string unit, address, host, served;
    int port = 0;
    bool live = false;
    for (const Replaced& r : sw.replaces) {
      unit = r.unit;
      address = r.address;
      if (r.gate.port == 0) break;
      host = r.gate.host;
      port = r.gate.port;
      served = r.gate.served_name;
      auto it = desired.services.find(r.address.substr(std::string("service/").size()));
      if (served.empty() && it != desired.services.end()) served = it->second.ServedName();
      live = !served.empty();
      break;
    }
    const ObservedUnit* own = index.Unit(sw.unit);
    const bool has_file = own && index.Owns(*own) && !own->content.empty();
    const bool rewritten = written.count(sw.unit) > 0;
    if (unit.empty() && sw.mode == SwitchMode::kInPlace && (!own || own->IsUp())) {
      unit = sw.unit;
      address = sw.address;
      host = g.host;
      port = g.port;
      served = g.served_name;
      live = true;
    }
    // What berth recorded, when it cannot measure: of what it replaces; else of the service as
    // it was before its unit changed; else of what served its port before (a service the
    // manifest stops there, newest first); else of the service itself.
    std::vector<std::string> candidates;
    if (!unit.empty()) candidates.push_back(unit);
    if (unit.empty() && has_file && rewritten) candidates.push_back(sw.unit);
    if (unit.empty()) {
      std::vector<std::string> before;
      auto it = desired.services.find(sw.address.substr(std::string("service/").size()));
      if (it != desired.services.end() && it->second.port)
        for (const auto& [name, other] : desired.services) {
          const ObservedUnit* u = index.Unit(other.UnitName());
          if (name != it->first && other.state != ServiceState::kRunning && other.port &&
              *other.port == *it->second.port && u && index.Owns(*u))
            before.push_back(other.UnitName());
        }
      auto newest = [&](const std::string& u) {
        auto f = observed.state.gate_figures.find(u);
        return f == observed.state.gate_figures.end() || f->second.empty() ? std::string()
                                                                           : f->second.back().time;
      };
      std::stable_sort(
          before.begin(), before.end(),
          [&](const std::string& a, const std::string& b) { return newest(a) > newest(b); });
      candidates.insert(candidates.end(), before.begin(), before.end());
    }
    if (unit.empty() && has_file && !rewritten) candidates.push_back(sw.unit);
    const GateFigures* recorded = nullptr;
    std::string settings;
    for (const std::string& c : candidates) {
      std::string c_settings = RunningSettings(index, c);
      if (c == candidates.front()) settings = c_settings;
      auto it = observed.state.gate_figures.find(c);
      if (it == observed.state.gate_figures.end()) continue;
      recorded = NewestRecorded(it->second, c_settings, LoadOf(g));
      if (recorded) {
        if (!live) unit = c;
        break;
      }
    }
    if (unit.empty() && !candidates.empty()) unit = candidates.front();
    Action& floor = plan->actions[floor_step];
    FloorStep& f = floor.As<FloorStep>();
    if (recorded) {
      f.reference_unit = recorded->unit;
      f.recorded = *recorded;
    }
    std::string recorded_words = recorded ? recorded->unit + "'s figures recorded " +
                                                GateFiguresOrigin(*recorded) + ": " +
                                                GateFiguresText(*recorded)
                                          : "";
    if (!live && recorded) {
      floor.detail += "; reference: " + recorded_words + " (" + unit + " " +
                      (unit == sw.unit ? "does not serve before its start" : "does not serve now") +
                      ")";
      continue;
    }
    if (!live) {
      std::string why = unit.empty()
                            ? (sw.replaces.empty() ? "it replaces no running service"
                                                   : "berth knows no port and served name of what "
                                                     "it replaces")
                            : unit + " does not serve now" +
                                  (sw.replaces.empty() ? "" : " on a port berth knows") +
                                  ", and berth recorded no figures of it with " +
                                  (settings.empty() ? "its settings" : "the settings it has now") +
                                  " and this load";
      if (f.refuse_without_reference) {
        Problem p;
        p.step = floor_step;
        p.resource = "manifest";
        p.message = "the relative floor of " + sw.unit +
                    " has no reference to compare with: " + why +
                    ", and its gates.floor.without_reference is refuse. Nothing was " +
                    "changed; set without_reference: absolute (with absolute limits) to gate " +
                    "it on those alone, or remove relative:";
        plan->problems.push_back(p);
      }
      bool absolute =
          f.min_output_tps > 0 || f.max_ttft_p50_ms || f.max_ttft_p99_ms || f.min_goodput_rps > 0;
      floor.detail +=
          "; no reference (" + why + "): " +
          (f.refuse_without_reference ? std::string("refused")
           : absolute                 ? std::string("falls back to the absolute limits")
                      : std::string("falls back to the absolute limits, and none is set: only that "
                                    "requests finish and tokens come back"));
      continue;
    }
    Action m = MakeAction(ActionKind::kReference, address, Reason::kFloorReference);
    m.unit = unit;
    FloorStep& ref = m.As<FloorStep>();
    ref.host = host;
    ref.port = port;
    ref.served_name = served;
    ref.concurrency = f.concurrency;
    ref.prompt_tokens = f.prompt_tokens;
    ref.max_tokens = f.max_tokens;
    ref.duration_ms = f.duration_ms;
    ref.goodput_ttft_ms = f.goodput_ttft_ms;
    ref.goodput_tpot_ms = f.goodput_tpot_ms;
    ref.goodput_e2el_ms = f.goodput_e2el_ms;
    ref.settings = settings;
    if (const ObservedUnit* u = index.Unit(unit)) ref.commit = SnapshotCommit(u->content);
    m.detail = std::to_string(f.concurrency) + " streamed requests for " +
               FormatDurationMs(f.duration_ms) + " (max_tokens " + std::to_string(f.max_tokens) +
               ") on " + unit + " (port " + std::to_string(port) + ", '" + served +
               "') before the switch to " + sw.unit + ": the reference its relative floor " +
               "compares with";
    f.reference_unit = unit;
    floor.detail += "; reference: measured on " + unit + " just before the switch";
    if (recorded) floor.detail += " (should that fail: " + recorded_words + ")";
    size_t at = sw.start;
    for (size_t i : sw.steps) at = std::min(at, i);
    InsertActions(plan, at, {m});
  }
}

void StampFloorSettings(const PlanIndex& index, Plan* plan) {
  std::map<std::string, const std::string*> written;  // unit -> the content the plan writes
  for (const Action& a : plan->actions)
    if (a.kind == ActionKind::kWriteUnit) written[a.unit] = &a.As<UnitFileStep>().content;
  for (Action& a : plan->actions) {
    if (a.kind != ActionKind::kFloor) continue;
    FloorStep& f = a.As<FloorStep>();
    const std::string* content = nullptr;
    if (auto it = written.find(a.unit); it != written.end()) {
      content = it->second;
    } else if (const ObservedUnit* u = index.Unit(a.unit); u && index.Owns(*u)) {
      content = &u->content;
    }
    if (!content || content->empty()) continue;
    f.settings = RestartDigest(*content);
    f.commit = SnapshotCommit(*content);
  }
}

void ApplyStateRules(const Desired& desired, const Observed& observed, const ReportedNames& names,
                     Plan* plan) {
  const BerthState& st = observed.state;
  if (!st.interrupted.empty())
    plan->warnings.push_back(st.interrupted +
                             "; this run looks at the host afresh and finishes the change");
  for (const auto& [address, f] : st.failures)
    plan->warnings.push_back("last apply failed on " + address + " at " + f.time + ": " +
                             f.message);
  if (!st.held.empty() && st.held.digest == desired.digest && !plan->actions.empty())
    plan->warnings.push_back(
        "this manifest's change is held: its last apply failed on " + st.held.address + " at " +
        st.held.time +
        " after taking a service down; berth apply and the reconcile loop do not try it again "
        "until the manifest changes, or once more with berth apply --retry");
  if (plan->blocked()) return;
  std::vector<std::string> suspects = st.ungated;
  for (const auto& [address, f] : st.failures)
    if (std::find(suspects.begin(), suspects.end(), address) == suspects.end())
      suspects.push_back(address);
  for (const std::string& address : suspects) {
    bool gated = std::any_of(plan->actions.begin(), plan->actions.end(), [&](const Action& a) {
      return a.kind == ActionKind::kWaitHealthy && a.address == address;
    });
    if (gated || address.rfind("service/", 0) != 0) continue;
    auto it = desired.services.find(address.substr(std::string("service/").size()));
    if (it == desired.services.end()) continue;
    const ServiceSpec& s = it->second;
    if (s.state != ServiceState::kRunning || !s.port) continue;
    bool interrupted = std::find(st.ungated.begin(), st.ungated.end(), address) != st.ungated.end();
    // Before a front routes to it and before its enable, if any: the front sends requests
    // only to what passed its gates, and a reboot brings back only what was seen healthy.
    auto at = std::find_if(plan->actions.begin(), plan->actions.end(), [&](const Action& a) {
      return (a.kind == ActionKind::kEnable && a.unit == s.UnitName()) ||
             (a.kind == ActionKind::kRoute && a.As<FrontStep>().server == s.name);
    });
    size_t where = static_cast<size_t>(at - plan->actions.begin());
    if (!interrupted) {
      InsertActions(
          plan, where,
          {HealthGate(s, address, names, "its last apply failed; it runs, but is it healthy?")});
      continue;
    }
    // An interrupted switch is seen through as a whole: its health gate and every gate the
    // manifest gives it after that, each failing (and rolled back) as it would have then.
    std::vector<Action> chain = {
        HealthGate(s, address, names, "an interrupted apply started it but never saw it healthy")};
    for (Action& g : GatesAfterHealth(desired.host, s, address, names)) {
      g.detail = "an interrupted apply started it but never saw this gate pass: " + g.detail;
      chain.push_back(std::move(g));
    }
    for (Action& g : chain) g.reason = Reason::kInterruptedSwitch;
    InsertActions(plan, where, chain);
  }
}

}  // namespace berth
