// berth tune's text: the plan (--plan) and the results table. Names, settings, reasons and the
// patch are the user's or a server's text: every one is escaped on its way out.
#include "engine/output/tune_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "core/units.h"
#include "core/untrusted_text.h"
#include "engine/output/bench_text.h"

namespace berth {
namespace {

using Verdict = TuneOutcome::Verdict;

std::string Printf(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// Characters, not bytes: a name may be UTF-8 (EscapeLine leaves it UTF-8).
size_t Width(const std::string& s) {
  return std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; });
}

// Rows of cells in aligned columns, two spaces apart; `right[i]` right-aligns column i. The
// last column is not padded, so a long one (settings, a reason) does not widen the others.
std::string Table(const std::vector<std::vector<std::string>>& rows,
                  const std::vector<bool>& right) {
  std::vector<size_t> width;
  for (const auto& cells : rows) {
    width.resize(std::max(width.size(), cells.size()), 0);
    for (size_t i = 0; i < cells.size(); ++i) width[i] = std::max(width[i], Width(cells[i]));
  }
  std::string out;
  for (const auto& cells : rows) {
    std::string line;
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string fill(width[i] - Width(cells[i]), ' ');
      const bool last = i + 1 == cells.size();
      line += (i ? "  " : "") +
              (i < right.size() && right[i] ? fill + cells[i] : cells[i] + (last ? "" : fill));
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string Name(const TuneOutcome& o) { return EscapeLine(o.candidate.name); }

std::string Settings(const TuneCandidate& c) {
  if (c.settings.empty()) return "(as declared)";
  std::string out;
  for (const auto& s : c.settings)
    out.append(out.empty() ? "" : " ")
        .append(EscapeLine(s.path))
        .append("=")
        .append(EscapeLine(s.value));
  return out;
}

// `text` after `lead`, its further lines indented under the first, escaped.
std::string Indented(const std::string& lead, const std::string& text) {
  std::string safe = EscapeControl(text), out = lead;
  const std::string indent(lead.size(), ' ');
  for (char c : safe) out += c == '\n' ? "\n" + indent : std::string(1, c);
  return out + "\n";
}

// A switch's time as berth plan writes a dark window: "850ms", whole seconds from one up
// ("42s", "1m35s").
std::string Took(uint64_t ms) {
  if (ms < 1000) return FormatDurationMs(ms);
  // Rounded to the nearest second, except where rounding up would pass 2^64.
  return FormatDurationMs((ms / 1000 + (ms % 1000 >= 500 && ms / 1000 < UINT64_MAX / 1000)) * 1000);
}

std::string Dark(const TuneOutcome& o) {
  if (o.dark_expected_ms == 0 && o.dark_worst_ms == 0) return "none";
  return Took(o.dark_expected_ms) + " / " + Took(o.dark_worst_ms);
}

std::string Limits(const TuneObjective& o) {
  std::vector<std::string> parts;
  if (o.ttft_p99_ms > 0) parts.push_back("TTFT p99 <= " + FormatLatencyMs(o.ttft_p99_ms));
  if (o.tpot_p99_ms > 0) parts.push_back("TPOT p99 <= " + FormatLatencyMs(o.tpot_p99_ms));
  if (o.e2e_p99_ms > 0) parts.push_back("E2E p99 <= " + FormatLatencyMs(o.e2e_p99_ms));
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return out;
}

bool Maximizes(const TuneReport& r, TuneObjective::Metric m) {
  return r.spec.objective.maximize == m;
}

// The figure "best" is decided on, with its unit.
double Objective(const TuneReport& r, const TuneFigures& f) {
  return Maximizes(r, TuneObjective::Metric::kGoodput) ? f.goodput_rps : f.output_tps;
}
std::string ObjectiveText(const TuneReport& r, double v) {
  return Maximizes(r, TuneObjective::Metric::kGoodput)
             ? Printf("%.2f", v) + " good req/s"
             : (v < 1000 ? FormatTps(v) : FormatGrouped(v)) + " output tok/s";
}

// The three lines both texts open with: what is tuned, under which load, for what.
std::string Header(const TuneReport& r) {
  std::ostringstream out;
  const TuneSpec& s = r.spec;
  out << "berth tune " << EscapeLine(s.service) << ": "
      << (r.model.empty() ? std::string("(model unknown)") : EscapeLine(r.model)) << "@"
      << (r.commit.empty() ? std::string("(commit unknown)") : EscapeLine(Utf8Prefix(r.commit, 12)))
      << ", " << r.outcomes.size() << " candidate" << (r.outcomes.size() == 1 ? "" : "s");
  if (!s.file.empty()) out << " from " << EscapeLine(s.file);
  if (!r.started.empty()) out << ", started " << EscapeLine(r.started);
  out << "\n";
  const TuneLoad& l = s.load;
  out << "load: " << l.concurrency << " stream" << (l.concurrency == 1 ? "" : "s") << ", ";
  if (l.num_prompts > 0)
    out << l.num_prompts << " requests";
  else
    out << FormatDurationMs(l.duration_ms ? l.duration_ms : 30000);
  if (l.request_rate > 0)
    out << " at " << FormatDouble(l.request_rate) << " requests/s (Poisson, seed " << l.seed << ")";
  out << "; " << (l.chat ? "chat completions" : "completions") << ", prompt " << l.prompt_tokens
      << " words, max " << l.max_tokens << " tokens";
  if (l.warmup_requests) out << ", " << l.warmup_requests << " warm-up requests first";
  out << "\n";
  std::string limits = Limits(s.objective);
  out << "best: the highest "
      << (Maximizes(r, TuneObjective::Metric::kGoodput) ? "goodput (requests/s within the limits)"
                                                        : "output tok/s")
      << (limits.empty() ? ", no latency limit" : " with " + limits) << "\n";
  return out.str();
}

}  // namespace

const char* TuneVerdictWord(Verdict v) {
  switch (v) {
    case Verdict::kMeasured:
      return "measured";
    case Verdict::kInfeasible:
      return "infeasible";
    case Verdict::kFailed:
      return "failed";
    case Verdict::kNotRun:
      return "not_run";
  }
  return "not_run";
}

std::string TunePlanText(const TuneReport& r) {
  std::ostringstream out;
  out << Header(r) << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"candidate", "feasible", "switch", "dark (expected / worst)", "settings"}};
  size_t feasible = 0;
  for (const auto& o : r.outcomes) {
    const bool ok = o.verdict != Verdict::kInfeasible;
    feasible += ok;
    rows.push_back({Name(o), ok ? "yes" : "no", ok ? EscapeLine(o.switch_mode) : "-",
                    ok ? Dark(o) : "-", Settings(o.candidate)});
  }
  out << Table(rows, {false, false, false, true, false});
  if (feasible < r.outcomes.size()) {
    out << "\ninfeasible (refused before anything stops):\n";
    for (const auto& o : r.outcomes)
      if (o.verdict == Verdict::kInfeasible)
        out << Indented("  " + Name(o) + ": ", o.why.empty() ? "(no reason given)" : o.why);
  }
  out << "\n" << feasible << " of " << r.outcomes.size() << " feasible";
  if (feasible)
    out << ": berth tune without --plan switches to each in turn through its gates, measures it "
           "and goes back";
  out << "\n";
  return out.str();
}

std::string TuneResultText(const TuneReport& r) {
  std::ostringstream out;
  out << Header(r) << "\n";
  std::vector<std::vector<std::string>> rows = {
      {"candidate", "verdict", "gates", "output tok/s", "req/s", "TTFT p50", "TTFT p99", "TPOT p50",
       "TPOT p99", "E2E p99", "switch", "dark planned", "limits"}};
  bool resumed = false;
  for (size_t i = 0; i < r.outcomes.size(); ++i) {
    const TuneOutcome& o = r.outcomes[i];
    std::string verdict = r.winner == i ? "best" : TuneVerdictWord(o.verdict);
    if (o.verdict == Verdict::kNotRun) verdict = "not run";
    if (o.resumed) verdict += "*";
    resumed = resumed || o.resumed;
    // The gates by their first word ("health 3.2 s" is "health").
    std::string gates;
    for (const auto& g : o.gates)
      gates.append(gates.empty() ? "" : ",").append(EscapeLine(g.substr(0, g.find(' '))));
    std::vector<std::string> cells = {Name(o), verdict, gates.empty() ? "-" : gates};
    if (const auto& f = o.figures) {
      cells.insert(cells.end(), {FormatTps(f->output_tps), Printf("%.2f", f->request_tps),
                                 FormatLatencyMs(f->ttft_p50_ms), FormatLatencyMs(f->ttft_p99_ms),
                                 FormatLatencyMs(f->tpot_p50_ms), FormatLatencyMs(f->tpot_p99_ms),
                                 FormatLatencyMs(f->e2e_p99_ms)});
    } else {
      cells.resize(cells.size() + 7, "-");
    }
    const bool switched = o.verdict == Verdict::kMeasured || o.verdict == Verdict::kFailed;
    cells.push_back(switched && o.switch_ms ? Took(o.switch_ms) : "-");
    cells.push_back(o.verdict == Verdict::kInfeasible ? "-" : Dark(o));
    if (!o.figures)
      cells.push_back("-");
    else
      cells.push_back(o.meets_limits ? "met" : "missed: " + EscapeLine(o.missed));
    rows.push_back(std::move(cells));
  }
  out << Table(rows,
               {false, false, false, true, true, true, true, true, true, true, true, true, false});
  if (resumed) out << "* measured by an earlier run (--resume), not again now\n";

  out << "\nsettings:\n";
  std::vector<std::vector<std::string>> settings;
  for (const auto& o : r.outcomes) settings.push_back({"  " + Name(o), Settings(o.candidate)});
  out << Table(settings, {});

  // The best, against the declared configuration when it was measured.
  out << "\n";
  const TuneOutcome* declared = nullptr;
  if (r.spec.baseline && !r.outcomes.empty() && r.outcomes[0].figures) declared = &r.outcomes[0];
  if (r.winner && *r.winner < r.outcomes.size() && r.outcomes[*r.winner].figures) {
    const TuneOutcome& w = r.outcomes[*r.winner];
    const double best = Objective(r, *w.figures);
    out << "best: " << Name(w) << ", " << ObjectiveText(r, best);
    if (declared == &w) {
      out << ": the declared configuration is already the best; nothing to change";
    } else if (declared && Objective(r, *declared->figures) > 0) {
      const double base = Objective(r, *declared->figures);
      out << ", " << Printf("%.1f", best / base) << "x the declared configuration ("
          << ObjectiveText(r, base) << ")";
    } else {
      out << " (the declared configuration was not measured to compare)";
    }
    out << "\n";
  } else {
    std::vector<std::string> missed;
    for (const auto& o : r.outcomes)
      if (o.figures && !o.meets_limits)
        missed.push_back(Name(o) + " (" + EscapeLine(o.missed.empty() ? "?" : o.missed) + ")");
    if (missed.empty()) {
      out << "no candidate was measured\n";
    } else {
      out << "no candidate met the limits: ";
      for (size_t i = 0; i < missed.size(); ++i) out << (i ? "; " : "") << missed[i];
      out << "\n";
    }
  }

  // What went wrong, each with its reason in full.
  auto reasons = [&](Verdict v, const char* title) {
    bool any = false;
    for (const auto& o : r.outcomes) {
      if (o.verdict != v) continue;
      if (!any) out << "\n" << title << "\n";
      any = true;
      out << Indented("  " + Name(o) + ": ", o.why.empty() ? "(no reason given)" : o.why);
    }
  };
  reasons(Verdict::kFailed, "failed (each switch undone: the configuration before it ran again):");
  reasons(Verdict::kInfeasible, "infeasible (refused before anything stopped):");
  std::vector<std::string> unrun;
  for (const auto& o : r.outcomes)
    if (o.verdict == Verdict::kNotRun) unrun.push_back(Name(o));
  if (!unrun.empty()) {
    out << "\nnot run (the sweep stopped before them):";
    for (size_t i = 0; i < unrun.size(); ++i) out << (i ? ", " : " ") << unrun[i];
    out << "\n";
  }
  for (const auto& o : r.outcomes)
    if (o.figures && o.figures->errors)
      out << Name(o) << ": " << o.figures->errors << " failed request"
          << (o.figures->errors == 1 ? "" : "s")
          << (o.figures->first_error.empty() ? ""
                                             : "; the first: " + EscapeLine(o.figures->first_error))
          << "\n";

  out << "\n";
  if (r.ended_on == "declared")
    out << "the host runs the declared configuration\n";
  else if (r.ended_on == "winner" && r.winner && *r.winner < r.outcomes.size())
    out << "the host runs the best, " << Name(r.outcomes[*r.winner]) << " (--keep-winner)\n";
  else if (!r.ended_on.empty())
    out << Indented("the host: ", r.ended_on);
  if (!r.patch.empty()) {
    out << "\nto keep it, commit this change of "
        << EscapeLine(r.declaring_file.empty() ? r.manifest_path : r.declaring_file) << ":\n"
        << EscapeControl(r.patch);
    if (r.patch.back() != '\n') out << "\n";
  }
  return out.str();
}

}  // namespace berth
