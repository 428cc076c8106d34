// The executor's runners of the preflight and of the gates after the health gate (reference,
// floor, smoke, soak): each acts on its own step payload (core/steps.h). The health gate and its
// scheduler stay in executor.cc with the rest of the run.
#include <algorithm>
#include <memory>

#include "core/desired.h"
#include "core/units.h"
#include "core/untrusted_text.h"
#include "engine/apply/executor.h"
#include "engine/apply/front_steps.h"
#include "providers/bench/load.h"
#include "providers/health/health_probe.h"
#include "providers/health/smoke_client.h"
#include "providers/host/command_runner.h"
#include "providers/host/engine_check.h"
#include "providers/systemd/systemd_manager.h"

namespace berth {
namespace {

// A command's output tail as lines, each one line with its controls and stray bytes shown as
// \xNN. The tail may begin inside a character the runner cut: those bytes are left out.
std::vector<std::string> OutputLines(std::string_view output) {
  for (int k = 0;
       k < 3 && !output.empty() && (static_cast<unsigned char>(output[0]) & 0xc0) == 0x80; ++k)
    output.remove_prefix(1);
  std::vector<std::string> lines;
  for (size_t from = 0; from < output.size();) {
    size_t nl = std::min(output.find('\n', from), output.size());
    lines.push_back(EscapeLine(output.substr(from, nl - from)));
    from = nl + 1;
  }
  return lines;
}

// Its last lines, at most 15, after "its output (last lines):"; "" when it printed nothing.
std::string TailOf(const std::vector<std::string>& lines) {
  std::string tail = lines.empty() ? "" : "\n  its output (last lines):";
  for (size_t k = lines.size() > 15 ? lines.size() - 15 : 0; k < lines.size(); ++k)
    tail += "\n    " + lines[k];
  return tail;
}

std::string Failure(const CommandResult& c, uint64_t timeout_ms) {
  return !c.started    ? c.error
         : c.timed_out ? "did not finish within " + FormatDurationMs(timeout_ms) + " and was killed"
         : c.signal    ? "was killed by signal " + std::to_string(c.signal)
                       : "exited with status " + std::to_string(c.exit_status);
}

// The engine's own words in the check program's last line "berth-engine-check: refused:
// TYPE: MESSAGE" (or "... error: ..." when the check itself could not run); "" for none.
std::string CheckVerdict(const std::vector<std::string>& lines, bool* refused) {
  constexpr std::string_view kRefused = "berth-engine-check: refused: ";
  constexpr std::string_view kError = "berth-engine-check: error: ";
  for (size_t k = lines.size(); k-- > 0;) {
    std::string_view l = lines[k];
    if (l.rfind(kRefused, 0) == 0) {
      *refused = true;
      return std::string(Utf8Prefix(l.substr(kRefused.size()), 2000));
    }
    if (l.rfind(kError, 0) == 0) {
      *refused = false;
      return std::string(Utf8Prefix(l.substr(kError.size()), 2000));
    }
  }
  return "";
}

const char* EngineWords(const std::string& engine) {
  return engine == "vllm" ? "vLLM" : engine == "sglang" ? "SGLang" : "llama.cpp";
}

// llama.cpp's words when llama-server or llama-fit-params refuse: the first line that is an
// error ("error: invalid argument: --bogus", "error while handling argument ...") or an E-level
// log line ("0.00.004.719 E llama_model_load_from_file_impl: failed to load model"); "" if none.
std::string LlamaVerdict(const std::vector<std::string>& lines) {
  for (const std::string& l : lines) {
    size_t e = l.find(" E ");
    if (l.rfind("error", 0) == 0) return std::string(Utf8Prefix(l, 2000));
    if (e != std::string::npos && !l.empty() && l[0] >= '0' && l[0] <= '9')
      return std::string(Utf8Prefix(std::string_view(l).substr(e + 3), 2000));
  }
  return "";
}

// What llama-fit-params says about memory, for apply's output: the memory breakdown table, the
// projection against free memory and the fitted arguments on stdout ("-c 1024 -ngl 0"), each
// without its log prefix.
std::vector<std::string> FitParamsSummary(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& l : lines) {
    for (std::string_view key :
         {"common_memory_breakdown_print: ", "projected to use ", "will leave ", "failed to fit"}) {
      size_t at = l.find(key);
      if (at == std::string::npos) continue;
      if (key == "common_memory_breakdown_print: ") at += key.size();
      out.emplace_back(Utf8Prefix(std::string_view(l).substr(at), 300));
      break;
    }
    if (l.rfind("-c ", 0) == 0) out.push_back("fitted arguments: " + l);
  }
  return out;
}

// Runs one command of the engine check of `a`; `lines` gets its output tail. The error says
// whether the engine refused (its own words) or the check could not run.
Status RunEngineCheck(CommandRunner& runner, const Action& a, const PreflightStep& p,
                      const std::vector<std::string>& cmd, const std::vector<std::string>& env,
                      std::vector<std::string>* lines) {
  CommandResult c = runner.Run(cmd, p.timeout_ms, &env);
  *lines = OutputLines(c.output_tail);
  if (c.ok()) return Status::Ok();
  bool refused = false;
  std::string verdict = CheckVerdict(*lines, &refused);
  if (p.engine == "llama-server" && c.started && !c.timed_out && c.exit_status == 1) {
    // llama.cpp's tools exit 1 with their reason: a flag or value the parser refuses, a model
    // that does not load, a context that does not fit.
    refused = true;
    verdict = LlamaVerdict(*lines);
    if (verdict.empty()) verdict = "exited with status " + std::to_string(c.exit_status);
  }
  std::string cmdline;
  for (const auto& x : cmd) {
    if (!cmdline.empty()) cmdline += ' ';
    cmdline += EscapeLine(x);
  }
  const std::string nothing =
      "; nothing was stopped or started (the check runs before anything goes dark)";
  const std::string off = "set preflight: {engine: off} on the service to skip the check";
  const std::string who = cmd.front().ends_with("/llama-fit-params")
                              ? std::string("llama.cpp's llama-fit-params")
                              : std::string(EngineWords(p.engine));
  if (refused)
    return Status::FailedPrecondition(
        "the engine check of " + a.address + " failed: " + who +
        " refused this configuration: " + verdict + nothing +
        ". Fix the service's settings (its args, engine options or model) so that " +
        EngineWords(p.engine) + " accepts them, or " + off + TailOf(*lines));
  return Status::FailedPrecondition(
      "the engine check of " + a.address + " could not run: " + cmdline + " " +
      Failure(c, p.timeout_ms) + " after " + FormatDurationMs(c.elapsed_ms) +
      (verdict.empty() ? "" : ": " + verdict) + nothing +
      ". The unit's engine may not start either (check its executable and environment), or " + off +
      TailOf(*lines));
}

}  // namespace

Status Executor::EngineCheck(const Action& a, const PreflightStep& p) {
  // What systemd gives every service: without it (no systemd, an error), its search path only.
  std::vector<std::string> manager;
  if (d_.systemd)
    if (Result<std::vector<std::string>> m = d_.systemd->ManagerEnvironment(); m.ok()) manager = *m;
  Result<std::vector<std::string>> env = UnitEnvironment(a, manager);
  if (!env.ok()) return env.status();
  Result<std::vector<std::string>> cmd = EngineCheckCommand(a, *env, d_.engine_check_dir);
  if (!cmd.ok()) return cmd.status();
  std::vector<std::string> lines;
  Status s = RunEngineCheck(*d_.commands, a, p, *cmd, *env, &lines);
  if (!s.ok() || p.engine != "llama-server") return s;
  // llama-server's parser took the argv: llama-fit-params on the model and context.
  Result<std::vector<std::string>> fit = LlamaFitParamsCommand(a, cmd->front());
  if (!fit.ok()) return fit.status();
  s = RunEngineCheck(*d_.commands, a, p, *fit, *env, &lines);
  if (s.ok())
    for (const std::string& l : FitParamsSummary(lines))
      Note("engine check of " + a.address + ": llama-fit-params: " + l);
  return s;
}

Status Executor::Preflight(const Action& a, const PreflightStep& p) {
  if (!d_.commands)
    return Status::Internal("no command runner to run the preflight of " + a.address);
  if (!p.engine.empty()) return EngineCheck(a, p);
  std::string cmd;
  for (const auto& x : p.argv) {
    if (!cmd.empty()) cmd += ' ';
    cmd += x;
  }
  CommandResult c = d_.commands->Run(p.argv, p.timeout_ms);
  if (c.ok()) return Status::Ok();
  std::string what = Failure(c, p.timeout_ms);
  std::string tail = TailOf(OutputLines(c.output_tail));
  return Status::FailedPrecondition(
      "the preflight of " + a.address + " failed: " + cmd + " " + what + " after " +
      FormatDurationMs(c.elapsed_ms) +
      "; nothing was stopped or started (it runs before anything goes dark). Fix what it "
      "reports, or change the service's preflight: command" +
      tail);
}

namespace {

LoadSpec FloorLoad(const FloorStep& f) {
  LoadSpec spec;
  spec.host = DialAddress(f.host);
  spec.port = f.port;
  spec.model = f.served_name;
  spec.concurrency = f.concurrency;
  spec.duration = std::chrono::milliseconds(f.duration_ms);
  spec.max_tokens = f.max_tokens;
  spec.prompt_tokens = f.prompt_tokens;
  spec.goodput_ttft_ms = static_cast<double>(f.goodput_ttft_ms);
  spec.goodput_tpot_ms = static_cast<double>(f.goodput_tpot_ms);
  spec.goodput_e2e_ms = static_cast<double>(f.goodput_e2el_ms);
  return spec;
}

// What `m` measured on `unit` under the load of `f`, as the state records it.
GateFigures Recorded(const std::string& unit, const char* source, const FloorStep& f,
                     const LoadFigures& m, double unix_now) {
  GateFigures g;
  g.time = Rfc3339(unix_now);
  g.unit = unit;
  g.source = source;
  g.commit = f.commit;
  g.settings = f.settings;
  g.concurrency = f.concurrency;
  g.max_tokens = f.max_tokens;
  g.prompt_tokens = f.prompt_tokens;
  g.goodput_ttft_ms = f.goodput_ttft_ms;
  g.goodput_tpot_ms = f.goodput_tpot_ms;
  g.goodput_e2el_ms = f.goodput_e2el_ms;
  g.seconds = m.seconds;
  g.requests = m.requests;
  g.errors = m.errors;
  g.output_tps = m.output_tps;
  g.ttft_p50_ms = m.ttft_p50_ms;
  g.ttft_p99_ms = m.ttft_p99_ms;
  g.tpot_p50_ms = m.tpot_p50_ms;
  g.has_goodput = m.has_goodput;
  g.goodput_rps = m.goodput_rps;
  return g;
}

std::string FloorFigures(const LoadFigures& m) {
  std::string s = FormatDouble(m.output_tps) + " output tok/s at concurrency " +
                  std::to_string(m.concurrency) + " over " + FormatDouble(m.seconds) +
                  " s, TTFT p50 " + FormatDouble(m.ttft_p50_ms) + " ms, p99 " +
                  FormatDouble(m.ttft_p99_ms) + " ms, TPOT p50 " + FormatDouble(m.tpot_p50_ms) +
                  " ms";
  if (m.has_goodput) {
    s += ", goodput ";
    s += FormatDouble(m.goodput_rps);
    s += " req/s";
  }
  s += ", ";
  s += std::to_string(m.requests);
  s += " requests, ";
  s += std::to_string(m.errors);
  s += " errors";
  return s;
}

// What `m` falls short of against the reference `ref` of `ref_unit` by the ratios of `f`, one
// line each with both sides and the limit.
std::vector<std::string> ShortOfReference(const FloorStep& f, const LoadFigures& m,
                                          const std::string& ref_unit, const GateFigures& ref) {
  std::vector<std::string> out;
  std::string of = "x of " + ref_unit + "'s ";
  auto at_least = [&](const char* name, double ratio, double got, double theirs, const char* per) {
    if (ratio > 0 && got < ratio * theirs)
      out.push_back(std::string(name) + " " + FormatDouble(got) + " " + per + " is below " +
                    FormatDouble(ratio) + of + FormatDouble(theirs) + " " + per + " (" +
                    FormatDouble(ratio * theirs) + ")");
  };
  at_least("output", f.rel_output_tps, m.output_tps, ref.output_tps, "tok/s");
  at_least("goodput", f.rel_goodput, m.goodput_rps, ref.goodput_rps, "req/s");
  auto latency = [&](const char* name, double ratio, double got, double theirs) {
    if (ratio > 0 && got > ratio * theirs)
      out.push_back(std::string(name) + " " + FormatDouble(got) + " ms is above " +
                    FormatDouble(ratio) + of + FormatDouble(theirs) + " ms (" +
                    FormatDouble(ratio * theirs) + ")");
  };
  latency("TTFT p50", f.rel_ttft_p50, m.ttft_p50_ms, ref.ttft_p50_ms);
  latency("TTFT p99", f.rel_ttft_p99, m.ttft_p99_ms, ref.ttft_p99_ms);
  latency("TPOT p50", f.rel_tpot_p50, m.tpot_p50_ms, ref.tpot_p50_ms);
  return out;
}

}  // namespace

Status Executor::Reference(const std::string& unit, const FloorStep& f, ExecResult* result) {
  if (!d_.load) return Status::Internal("no load generator to measure the reference on " + unit);
  Result<LoadFigures> r = d_.load(FloorLoad(f), d_.stop);
  std::string why;
  if (!r.ok())
    why = r.status().message();
  else if (r->output_tokens == 0 || r->requests == 0)
    why = "no request finished (" + FloorFigures(*r) +
          (r->first_error.empty() ? "" : "; first error: " + r->first_error) + ")";
  if (!why.empty()) {
    Note("reference: " + unit + " could not be measured: " + why +
         "; the relative floor that compares with it falls back as its manifest says");
    return Status::Ok();
  }
  GateFigures g = Recorded(unit, "reference", f, *r, d_.clock->UnixNow());
  references_[unit] = g;
  if (result) {
    result->reference_figures[unit] = FloorFigures(*r);
    result->gate_figures.push_back(g);
  }
  Note("reference: " + unit + " measured: " + FloorFigures(*r));
  return Status::Ok();
}

Status Executor::Floor(const std::string& unit, const FloorStep& f, ExecResult* result) {
  if (!d_.load) return Status::Internal("no load generator to run the floor gate of " + unit);
  Result<LoadFigures> r = d_.load(FloorLoad(f), d_.stop);
  if (!r.ok()) return r.status().WithContext("the floor gate of " + unit + " could not run");
  const LoadFigures& m = *r;
  std::string figures = FloorFigures(m);
  if (result) {
    result->floor_figures[unit] = figures;
    if (m.requests > 0)
      result->gate_figures.push_back(Recorded(unit, "floor", f, m, d_.clock->UnixNow()));
  }
  std::vector<std::string> short_of;
  if (f.min_output_tps > 0 && m.output_tps < f.min_output_tps)
    short_of.push_back("output " + FormatDouble(m.output_tps) + " tok/s is below the floor of " +
                       FormatDouble(f.min_output_tps));
  if (f.max_ttft_p50_ms && m.ttft_p50_ms > static_cast<double>(f.max_ttft_p50_ms))
    short_of.push_back("TTFT p50 " + FormatDouble(m.ttft_p50_ms) + " ms is above " +
                       std::to_string(f.max_ttft_p50_ms) + " ms");
  if (f.max_ttft_p99_ms && m.ttft_p99_ms > static_cast<double>(f.max_ttft_p99_ms))
    short_of.push_back("TTFT p99 " + FormatDouble(m.ttft_p99_ms) + " ms is above " +
                       std::to_string(f.max_ttft_p99_ms) + " ms");
  if (f.min_goodput_rps > 0 && m.goodput_rps < f.min_goodput_rps)
    short_of.push_back("goodput " + FormatDouble(m.goodput_rps) + " req/s (" +
                       std::to_string(m.good_requests) + " of " + std::to_string(m.requests) +
                       " requests met its limits) is below the floor of " +
                       FormatDouble(f.min_goodput_rps));
  if (m.output_tokens == 0) short_of.push_back("no output token came back");
  // Tokens of a stream that never ends count for nothing: a server must finish answers.
  if (m.requests == 0 && m.output_tokens > 0)
    short_of.push_back("no request finished within the measured " + FormatDouble(m.seconds) +
                       " s (" + std::to_string(m.cancelled) +
                       " still streaming at the end); if its answers are that long, lengthen "
                       "the floor's duration or lower its max_tokens");
  // The relative limits, against what the reference step measured on the replaced service,
  // else the figures berth recorded of it (the plan put them in the step).
  std::string reference;
  const GateFigures* ref = nullptr;
  if (auto it = references_.find(f.reference_unit); it != references_.end()) ref = &it->second;
  if (f.relative() && !ref && !f.recorded.empty()) {
    ref = &f.recorded;
    Note("floor: " + unit + " compares with " + f.reference_unit + "'s figures recorded " +
         GateFiguresOrigin(f.recorded) + " (it was not measured before the switch)");
  }
  if (f.relative() && ref) {
    for (std::string& s : ShortOfReference(f, m, f.reference_unit, *ref))
      short_of.push_back(std::move(s));
    reference = "; reference " + f.reference_unit + ": " + GateFiguresText(*ref);
    if (ref == &f.recorded) reference += " (recorded " + GateFiguresOrigin(f.recorded) + ")";
  } else if (f.relative()) {
    std::string none = f.reference_unit.empty()
                           ? "no reference to compare with"
                           : "no reference figures of " + f.reference_unit +
                                 " (its measurement before the switch did not succeed, and "
                                 "berth recorded none with its settings and this load)";
    if (f.refuse_without_reference)
      short_of.push_back(none + ", and gates.floor.without_reference is refuse");
    else
      Note("floor: " + unit + ": " + none + "; its absolute limits alone apply");
  }
  if (short_of.empty()) {
    Note("floor: " + unit + " passed: " + figures + reference);
    return Status::Ok();
  }
  std::string why;
  for (const auto& s : short_of) why += (why.empty() ? "" : "; ") + s;
  return Status::Unavailable("the floor gate of " + unit + " failed: " + why + " (measured " +
                             figures +
                             (m.first_error.empty() ? "" : "; first error: " + m.first_error) +
                             reference + "); it serves, but slower than the manifest's floor");
}

Status Executor::Smoke(const std::string& unit, const SmokeStep& g) {
  if (!d_.smoke) return Status::Internal("no smoke client to run the smoke gate of " + unit);
  SmokeRequest req;
  req.api = g.api;
  req.model = g.served_name;
  req.prompt = g.prompt;
  req.max_tokens = g.max_tokens;
  req.timeout_ms = g.timeout_ms;
  SmokeResult r = d_.smoke->Send(DialAddress(g.host), g.port, req);
  if (r.ok) {
    Note("smoke: " + unit + " answered in " + FormatDurationMs(r.elapsed_ms) + ": '" +
         EscapeLine(r.text) + "'");
    return Status::Ok();
  }
  return Status::Unavailable(
      "the smoke gate of " + unit + " failed after " + FormatDurationMs(r.elapsed_ms) + " (" +
      (g.api == "chat" ? std::string("chat") : std::string("completion")) + " of '" +
      g.served_name + "', max_tokens " + std::to_string(g.max_tokens) + ", timeout " +
      FormatDurationMs(g.timeout_ms) + "): " + r.detail +
      "; it passed its health gate but does not answer requests" + JournalTail(unit));
}

Status Executor::Soak(const std::string& unit, const SoakStep& g) {
  auto props = d_.systemd->GetUnits({unit});
  if (!props.ok()) return props.status().WithContext("the soak gate of " + unit + " cannot begin");
  const uint32_t base_restarts = (*props)[0].n_restarts;
  if (!g.front_socket.empty() && !d_.connect_front)
    return Status::Internal("no front seam (ExecutorDeps::connect_front) to watch the front of " +
                            unit + "'s soak gate");
  // The front's counters of this backend when the soak began: the requests sent to it since.
  auto front_counts = [&](int64_t* sent, int64_t* bad) {
    if (g.front_socket.empty()) return false;
    std::unique_ptr<FrontControl> f = d_.connect_front(g.front_socket, "");
    Result<FrontStats> st = f->Stats();
    if (!st.ok()) return false;
    const FrontServerStats* sv = st->Server(g.front_server);
    if (!sv) return false;
    *sent = sv->total_sessions;
    *bad = sv->responses_5xx;
    return true;
  };
  int64_t base_sent = 0, base_bad = 0;
  bool front = front_counts(&base_sent, &base_bad);
  const Clock::TimePoint began = d_.clock->Now();
  const Clock::TimePoint end = began + std::chrono::milliseconds(g.duration_ms);
  const auto interval = std::chrono::milliseconds(g.interval_ms ? g.interval_ms : 1000);
  auto watched = [&] {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d_.clock->Now() - began);
    return FormatDurationMs(static_cast<uint64_t>(std::max<int64_t>(0, ms.count())));
  };
  auto fail = [&](const std::string& why) {
    return Status::Unavailable("the soak gate of " + unit + " failed after " + watched() + " of " +
                               FormatDurationMs(g.duration_ms) + ": " + why +
                               "; it passed its other gates but does not stay up and serving" +
                               JournalTail(unit));
  };
  Note("soak: watching " + unit + " for " + FormatDurationMs(g.duration_ms));
  int failed_in_row = 0, probes = 0;
  int64_t sent = 0, bad = 0;
  for (;;) {
    if (d_.stop && d_.stop->load())
      return Status::Unavailable("stopped during the soak gate of " + unit +
                                 "; the next run watches it again");
    props = d_.systemd->GetUnits({unit});
    if (!props.ok()) return props.status().WithContext("the soak gate of " + unit);
    const UnitProperties& p = (*props)[0];
    // A restart systemd has queued counts as one: the process is gone already.
    int64_t restarts = static_cast<int64_t>(p.n_restarts) - base_restarts +
                       (p.sub_state.rfind("auto-restart", 0) == 0 ? 1 : 0);
    if (p.active_state == "failed" || p.active_state == "inactive")
      return fail("it stopped (" + p.active_state + ", Result=" + p.result + ", exit status " +
                  std::to_string(p.exec_main_status) + ")");
    if (restarts > g.max_restarts)
      return fail("systemd restarted it " + std::to_string(restarts) + " time" +
                  (restarts == 1 ? "" : "s") + " (at most " + std::to_string(g.max_restarts) +
                  " allowed)");
    if (g.port) {
      HealthResult h = d_.health->Probe(DialAddress(g.host), g.port, g.path, g.served_name);
      ++probes;
      failed_in_row = h.healthy ? 0 : failed_in_row + 1;
      if (failed_in_row > g.max_failed_probes)
        return fail(std::to_string(failed_in_row) + " health probes in a row failed (at most " +
                    std::to_string(g.max_failed_probes) + " allowed); last: " + h.detail);
    }
    if (front) {
      int64_t now_sent = 0, now_bad = 0;
      if (front_counts(&now_sent, &now_bad)) {
        sent = now_sent - base_sent;
        bad = now_bad - base_bad;
        if (sent >= g.min_requests && sent > 0 &&
            static_cast<double>(bad) > g.max_error_rate * static_cast<double>(sent))
          return fail(std::to_string(bad) + " of the " + std::to_string(sent) +
                      " requests the front sent it were answered 5xx (at most " +
                      FormatDouble(g.max_error_rate * 100) + "% allowed)");
      }
    }
    auto now = d_.clock->Now();
    if (now >= end) break;
    d_.clock->SleepFor(std::min(interval, std::chrono::duration_cast<std::chrono::milliseconds>(
                                              end - now + std::chrono::microseconds(999))));
  }
  Note("soak: " + unit + " passed: watched " + watched() + ", restarts within the allowed " +
       std::to_string(g.max_restarts) +
       (g.port ? ", " + std::to_string(probes) + " health probes" : "") +
       (front ? ", " + std::to_string(bad) + " of " + std::to_string(sent) + " requests 5xx"
              : std::string()));
  return Status::Ok();
}

}  // namespace berth
