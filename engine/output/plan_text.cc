#include <algorithm>
#include <sstream>
#include <string_view>

#include "core/observed.h"
#include "core/unified_diff.h"
#include "core/units.h"
#include "core/untrusted_text.h"
#include "engine/output/plan_output.h"
#include "planners/fleet.h"

namespace berth {

const char* ActionSymbol(const Action& a) {
  switch (a.kind) {
    case ActionKind::kDownload:
    case ActionKind::kStart:
    case ActionKind::kEnable:
      return "+";
    case ActionKind::kWriteUnit:
      return a.As<UnitFileStep>().replaces ? "~" : "+";
    case ActionKind::kDaemonReload:
    case ActionKind::kRestart:
      return "~";
    case ActionKind::kWake:
      return "+";
    case ActionKind::kSleep:
    case ActionKind::kStop:
    case ActionKind::kRemoveModel:
    case ActionKind::kRemoveUnit:
    case ActionKind::kDisable:
      return "-";
    case ActionKind::kWaitHealthy:
    case ActionKind::kPreflight:
    case ActionKind::kSmoke:
    case ActionKind::kFloor:
    case ActionKind::kSoak:
    case ActionKind::kReference:
    case ActionKind::kDrain:
    case ActionKind::kPrewarm:
      return ">";
    case ActionKind::kWriteFront:
    case ActionKind::kRoute:
    case ActionKind::kReady:
      return "~";
  }
  return "?";
}

namespace {

std::string Pad(const std::string& s, size_t width) {
  // Width in characters, not bytes: addresses are ASCII, so bytes are fine.
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

// Whole seconds from one second up ("42s", "15m42s"): a start time is not known to the ms.
std::string Seconds(uint64_t ms) {
  if (ms < 1000) return FormatDurationMs(ms);
  // Rounded to the nearest second, except where rounding up would pass 2^64 (saturated figures).
  const uint64_t s = ms / 1000 + (ms % 1000 >= 500 && ms / 1000 < UINT64_MAX / 1000);
  return FormatDurationMs(s * 1000);
}

// Whether a write-unit shows its diff: always when it replaces a file someone else wrote or
// edited (the reviewer must see what is lost), every one with --diff.
bool ShowsDiff(const Action& a, const PlanTextOptions& options) {
  if (a.kind != ActionKind::kWriteUnit) return false;
  return options.diffs || a.As<UnitFileStep>().loses_edits;
}

// `text` indented under its action, escaped: the old side is not berth's text.
void AppendIndented(const std::string& text, std::ostream& out) {
  std::string safe = EscapeControl(text);
  size_t pos = 0;
  while (pos < safe.size()) {
    size_t eol = safe.find('\n', pos);
    size_t end = eol == std::string::npos ? safe.size() : eol;
    out << "       " << std::string_view(safe).substr(pos, end - pos) << "\n";
    pos = end + 1;
  }
}

}  // namespace

namespace {

// "the last start of x.service took 2s", "last 3 stops of x.service took 1s–3s", "no stop of
// x.service recorded yet".
std::string Took(const char* what, const std::string& unit, const std::vector<uint64_t>& s) {
  if (s.empty()) return std::string("no ") + what + " of " + unit + " recorded yet";
  auto [lo, hi] = std::minmax_element(s.begin(), s.end());
  const std::string a = Seconds(*lo), b = Seconds(*hi);
  if (s.size() == 1) return std::string("the last ") + what + " of " + unit + " took " + a;
  return "last " + std::to_string(s.size()) + " " + what + "s of " + unit +
         (a == b ? " each took " + a : " took " + a + "–" + b);
}

}  // namespace

std::string DarkEstimateText(const DarkEstimate& e) {
  if (e.gate_unit.empty()) return "";
  // A stop of another unit begins it: its stops count too (a restart's are in its start times).
  const bool stop = !e.stop_unit.empty() && e.stop_unit != e.gate_unit;
  std::string took = Took("start", e.gate_unit, e.samples_ms);
  if (stop) took = Took("stop", e.stop_unit, e.stop_samples_ms) + "; " + took;
  std::string out = e.expected_ms ? "about " + Seconds(*e.expected_ms) + " (" + took + ")" : took;
  out += "; at worst " + Seconds(e.worst_ms) + " (";
  if (!e.stop_unit.empty()) {
    out += (stop ? e.stop_unit + "'s" : std::string("its")) + " stop, ";
    if (e.stop_timeout_ms == ObservedUnit::kNoStopTimeout)
      out += "not counted: systemd never times it out (TimeoutStopSec=infinity), then ";
    else if (e.stop_timeout_ms)
      out += "up to its " + Seconds(e.stop_timeout_ms) + " stop timeout, then ";
    else
      out += "not counted: its stop timeout is not known, then ";
  }
  out += (stop ? e.gate_unit + "'s " : std::string("its ")) + Seconds(e.gate_timeout_ms) +
         " health timeout";
  if (e.rollback.empty()) return out + "; past it berth gives up and the port stays dark)";
  for (const RollbackStart& r : e.rollback) {
    out += ", then " + r.unit + "'s start";
    if (!r.samples_ms.empty())
      out += ", " + Seconds(*std::max_element(r.samples_ms.begin(), r.samples_ms.end())) +
             " at the slowest recorded";
    else if (r.timeout_ms > 0)
      out += ", up to its " + Seconds(r.timeout_ms) + " health timeout";
    else
      out += " (not counted: berth knows no health check for it)";
  }
  return out + ", if berth rolls back)";
}

std::string UnitFileDiff(const Action& a) {
  if (a.kind != ActionKind::kWriteUnit) return "";
  const UnitFileStep& f = a.As<UnitFileStep>();
  if (!f.old_note.empty()) return "(no diff: " + f.old_note + ")\n";
  bool fresh = !f.replaces;
  return UnifiedDiff(f.old_content, f.content, fresh ? "/dev/null" : "a/" + a.unit, "b/" + a.unit);
}

namespace {

// "5-9", "3-4, 7": 1-based steps, runs of consecutive ones as ranges.
std::string StepRanges(const std::vector<size_t>& steps) {
  std::string out;
  for (size_t k = 0; k < steps.size();) {
    size_t end = k;
    while (end + 1 < steps.size() && steps[end + 1] == steps[end] + 1) ++end;
    // Appended piece by piece, not ("" or ", ") + std::to_string(...): g++ 12 -O3 warns falsely
    // on the temporary (-Wrestrict, GCC bug 105329), which fails the Release build.
    if (!out.empty()) out.append(", ");
    out.append(std::to_string(steps[k] + 1));
    if (end > k) out.append("-").append(std::to_string(steps[end] + 1));
    k = end + 1;
  }
  return out;
}

// "switch service/x (stop-first): steps 5-9; undo: stop it, start y.service again and wait for
// its health": what the switch is, and what the executor does when one of its gates fails.
std::string SwitchLine(const Switch& sw) {
  std::string line = "switch " + sw.address + " (" + SwitchModeName(sw.mode) + "): step" +
                     (sw.steps.size() == 1 ? " " : "s ") + StepRanges(sw.steps) + "; undo: ";
  if (sw.restores_unit) {
    line += "write back its unit file as it was, reload, restart it" +
            std::string(sw.gates.empty() ? "" : " and wait for its health");
  } else if (!sw.replaces.empty()) {
    line += "stop it";
    for (const Replaced& r : sw.replaces)
      line += ", start " + r.unit + " again" +
              (r.gate.port ? " and wait for its health" : " (berth knows no health check for it)");
  } else {
    line += sw.mode == SwitchMode::kStartFirst ? "none (what it replaces stops after its gates)"
            : sw.mode == SwitchMode::kInPlace  ? "none (it restarts on the unit it had)"
                                               : "none (it replaces nothing)";
  }
  if (sw.front_port && !sw.undo_route.empty() && (sw.restores_unit || !sw.replaces.empty()))
    line += "; then the front of port " + std::to_string(sw.front_port) + " routes back to " +
            sw.undo_route;
  return line;
}

}  // namespace

std::string PlanToText(const Plan& plan, const Desired& desired, const PlanTextOptions& options) {
  std::ostringstream out;
  WritePlanText(out, plan, desired, options);
  return out.str();
}

void WritePlanText(std::ostream& out, const Plan& plan, const Desired& desired,
                   const PlanTextOptions& options) {
  if (!plan.host_matches) {
    out << "Nothing to do on " << plan.host << ": " << plan.skip_reason << "\n";
    return;
  }
  size_t width = 0;
  for (const auto& a : plan.actions) width = std::max(width, a.address.size());
  for (const auto& n : plan.notes) width = std::max(width, n.address.size());
  width += 2;

  out << "berth plan for host " << plan.host << " (" << desired.files.size() << " manifest file"
      << (desired.files.size() == 1 ? "" : "s") << ")\n\n";
  if (plan.actions.empty()) out << "  No changes: the host matches the manifests.\n";
  for (size_t i = 0; i < plan.actions.size(); ++i) {
    const Action& a = plan.actions[i];
    std::string step = std::to_string(i + 1);
    out << std::string(step.size() < 3 ? 3 - step.size() : 0, ' ') << step << "  "
        << ActionSymbol(a) << " " << Pad(ActionKindName(a.kind), 14) << Pad(a.address, width)
        << EscapeControl(a.detail) << "\n";
    if (ShowsDiff(a, options)) AppendIndented(UnitFileDiff(a), out);
  }
  for (const auto& n : plan.notes)
    out << "     = " << Pad(n.verb, 14) << Pad(n.address, width) << EscapeControl(n.detail) << "\n";
  out << "\n";
  for (const Switch& sw : plan.switches) out << SwitchLine(sw) << "\n";
  for (const ParallelGroup& g : plan.groups) {
    out << "together: ";
    for (size_t k = 0; k < g.chains.size(); ++k) {
      const Chain& c = g.chains[k];
      out << (k == 0                     ? ""
              : k + 1 == g.chains.size() ? " and "
                                         : ", ")
          << plan.actions[c.start].address << " (steps " << (c.start + 1) << "-" << (c.last + 1)
          << ")";
    }
    out << " start side by side and are waited on at once: their GPUs and ports are disjoint\n";
  }

  bool downloads = std::any_of(plan.actions.begin(), plan.actions.end(),
                               [](const Action& a) { return a.kind == ActionKind::kDownload; });
  bool dark = false;
  for (const auto& d : plan.disruptions) {
    if (d.front_mode == "none") {
      out << "port " << d.port << ": no disruption: " << d.reason << " (step " << d.from_step + 1
          << ")\n";
      continue;
    }
    if (d.front_mode == "held") {
      out << "port " << d.port << ": held up to " << FormatDurationMs(d.hold_ms)
          << ", not refused, from step " << d.from_step + 1 << " until step "
          << (d.until_step ? *d.until_step + 1 : 0) << " (" << d.reason << ")";
      std::string estimate = DarkEstimateText(d.estimate);
      if (!estimate.empty()) out << ": " << estimate;
      out << "; past the bound, 503 with Retry-After\n";
      continue;
    }
    dark = true;
    out << "disruption: port " << d.port << " unavailable from step " << d.from_step + 1;
    if (d.until_step)
      out << " until step " << *d.until_step + 1 << " is healthy";
    else
      out << " on (nothing serves it after this plan"
          << (d.caveat.empty() ? "" : " that berth knows of: " + d.caveat) << ")";
    out << " (" << d.reason << ")";
    std::string estimate = DarkEstimateText(d.estimate);
    if (!estimate.empty()) out << ": " << estimate;
    if (downloads && d.until_step) out << "; the downloads finish before it";
    out << "\n";
  }
  if (!dark && !plan.actions.empty()) out << "disruption: none (no port goes dark)\n";
  if (desired.fleet.enabled()) {
    std::optional<size_t> turn = FirstDisruptiveStep(plan);
    const FleetSpec& f = desired.fleet;
    out << "fleet " << f.name << ": ";
    if (turn) {
      std::string wave = WaveName(f, WaveIndex(f, plan.host));
      out << "step " << (*turn + 1) << " waits for this host's turn (at most " << f.max_unavailable
          << " host" << (f.max_unavailable == 1 ? "" : "s") << " dark at once"
          << (wave.empty() ? "" : "; wave " + wave) << "); the steps before it do not\n";
    } else {
      out << "nothing here goes dark; no turn needed\n";
    }
  }
  if (downloads) {
    out << "disk: " << FormatBytes(plan.disk_needed) << " to download"
        << (plan.disk_known ? "" : " (at least: some sizes are unknown)") << ", "
        << FormatBytes(plan.disk_free) << " free, reserve " << FormatSize(plan.disk_reserve)
        << "\n";
  }
  for (const auto& w : plan.warnings) out << "warning: " << EscapeControl(w) << "\n";
  if (plan.blocked()) {
    out << "\nBLOCKED: this plan cannot run; nothing will be changed.\n";
    for (const auto& p : plan.problems) {
      out << "  ";
      if (p.step) out << "step " << *p.step + 1 << ", ";
      out << p.resource << ": " << EscapeControl(p.message) << "\n";
    }
  }
  if (!plan.actions.empty()) out << "\n" << PlanSummary(plan) << "\n";
}

}  // namespace berth
