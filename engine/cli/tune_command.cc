// berth tune -f MANIFEST TUNEFILE: the sweep (engine/tune/tune.h) on the live host, measured with
// berth bench's load generator; the report, plot and patch written beside its results.
#include <filesystem>
#include <sstream>

#include "core/atomic_file.h"
#include "engine/apply/reconciler.h"
#include "engine/cli/commands.h"
#include "engine/cli/live_host.h"
#include "engine/output/tune_report.h"
#include "engine/tune/tune.h"
#include "manifests/tune_file.h"
#include "planners/servers/adapter.h"
#include "providers/bench/load.h"

namespace berth {
namespace {

TuneFigures FiguresOf(const LoadFigures& l) {
  TuneFigures f;
  f.requests = l.requests;
  f.errors = l.errors;
  f.output_tokens = l.output_tokens;
  f.seconds = l.seconds;
  f.output_tps = l.output_tps;
  f.request_tps = l.request_tps;
  f.goodput_rps = l.goodput_rps;
  f.ttft_p50_ms = l.ttft_p50_ms;
  f.ttft_p99_ms = l.ttft_p99_ms;
  f.tpot_p50_ms = l.tpot_p50_ms;
  f.tpot_p99_ms = l.tpot_p99_ms;
  f.itl_p50_ms = l.itl_p50_ms;
  f.itl_p99_ms = l.itl_p99_ms;
  f.e2e_p50_ms = l.e2e_p50_ms;
  f.e2e_p99_ms = l.e2e_p99_ms;
  f.first_error = l.first_error;
  return f;
}

// The service measured as `berth bench` measures it: its port and served name, one level.
Result<TuneFigures> Measure(const Desired& desired, const std::string& service,
                            const TuneLoad& load, const TuneObjective& objective,
                            const std::atomic<bool>* stop) {
  const ServiceSpec& svc = desired.services.at(service);
  LoadSpec spec;
  spec.host = svc.DialHost();
  spec.port = svc.port.value_or(0);
  spec.model = svc.ServedName();
  if (std::string reported = AdapterFor(svc.engine).ReportedName(svc, {}); !reported.empty())
    spec.model = reported;
  spec.chat = load.chat;
  spec.prompt_tokens = load.prompt_tokens;
  spec.max_tokens = load.max_tokens;
  spec.concurrency = load.concurrency;
  spec.num_prompts = load.num_prompts;
  spec.duration = std::chrono::milliseconds(load.num_prompts ? 0 : load.duration_ms);
  spec.request_rate = load.request_rate;
  spec.seed = load.seed;
  spec.warmup_requests = load.warmup_requests;
  spec.goodput_ttft_ms = objective.ttft_p99_ms;
  spec.goodput_tpot_ms = objective.tpot_p99_ms;
  spec.goodput_e2e_ms = objective.e2e_p99_ms;
  Result<LoadFigures> r = RunLoad(spec, stop);
  if (!r.ok()) return r.status();
  return FiguresOf(*r);
}

// report.txt, plot.svg and winner.patch beside report.json; the paths written.
std::vector<std::string> WriteFiles(const TuneReport& report, const std::string& dir,
                                    std::ostream& err) {
  std::vector<std::pair<std::string, std::string>> files = {
      {dir + "/report.txt", TuneResultText(report)}, {dir + "/plot.svg", TunePlotSvg(report)}};
  if (!report.patch.empty()) files.emplace_back(dir + "/winner.patch", report.patch);
  std::vector<std::string> written = {dir + "/report.json"};
  std::error_code ec;
  std::filesystem::remove(dir + "/winner.patch", ec);
  for (const auto& [path, text] : files) {
    if (Status s = WriteFileAtomically(path, text); !s.ok())
      err << "berth tune: " << s.message() << "\n";
    else
      written.push_back(path);
  }
  return written;
}

}  // namespace

int RunTuneCommand(const TuneCommand& cmd, std::ostream& out, std::ostream& err) {
  if (cmd.format != "text" && cmd.format != "json") {
    err << "berth tune: unknown output format '" << cmd.format << "' (use text or json)\n";
    return kExitError;
  }
  TuneLoadResult file = LoadTuneFile(cmd.tune_file);
  if (!file.ok()) {
    for (const Diagnostic& d : file.diagnostics) err << d.ToString() << "\n";
    err << "berth tune: " << file.diagnostics.size() << " problem"
        << (file.diagnostics.size() == 1 ? "" : "s") << " in " << cmd.tune_file
        << "; nothing was tried\n";
    return kExitError;
  }
  LiveHost live(cmd.host);
  std::ostringstream quiet;
  Reporter say(quiet, quiet);
  TuneOptions o;
  o.manifest_path = cmd.manifest_path;
  o.state_dir = cmd.state_dir.empty() ? DefaultStateDir() : cmd.state_dir;
  o.spec = file.spec;
  o.plan_only = cmd.plan_only;
  o.resume = cmd.resume;
  o.keep_winner = cmd.keep_winner;
  o.lock_timeout = std::chrono::seconds(cmd.lock_timeout_s);
  o.stop = cmd.stop;
  std::ostringstream log;
  o.pass_log = &log;
  std::ostream& progress = cmd.format == "json" ? err : out;
  o.progress = [&](const std::string& line) { progress << "berth tune: " << line << std::endl; };
  TuneDeps deps;
  deps.pass = LiveReconcilerDeps(&live, &say);
  deps.pass.at_step = cmd.at_step;
  const TuneObjective objective = file.spec.objective;
  deps.measure = [&objective](const Desired& d, const std::string& service, const TuneLoad& load,
                              const std::atomic<bool>* stop) {
    return Measure(d, service, load, objective, stop);
  };
  Result<TuneReport> report = TuneService(o, deps);
  std::string dir = TuneResultsDir(o.state_dir, file.spec.service);
  if (!o.plan_only) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    WriteFileAtomically(dir + "/passes.log", log.str());
  }
  if (!report.ok()) {
    err << "berth tune: " << report.status().message() << "; nothing was tried\n";
    return kExitError;
  }
  if (cmd.format == "json") {
    out << TuneReportJson(*report);
  } else {
    out << (o.plan_only ? TunePlanText(*report) : TuneResultText(*report));
  }
  if (o.plan_only) return kExitOk;
  for (const std::string& path : WriteFiles(*report, dir, err))
    progress << "berth tune: wrote " << path << "\n";
  progress << "berth tune: each pass's own output is in " << dir << "/passes.log\n";
  if (report->ended_on != "declared" && report->ended_on != "winner") return kExitFailed;
  return cmd.stop && cmd.stop->load() ? kExitError : kExitOk;
}

}  // namespace berth
