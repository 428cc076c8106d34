// berth bench: the service's port, served name and model from the manifest, a health check,
// then the load generator (providers/bench) at each concurrency; results into the state dir.
#include <charconv>
#include <cmath>
#include <optional>
#include <set>

#include "core/hf_cache.h"
#include "core/read_file.h"
#include "core/units.h"
#include "engine/apply/reconciler.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/output/bench_text.h"
#include "engine/state/bench_history.h"
#include "engine/state/state.h"
#include "planners/servers/adapter.h"
#include "providers/bench/load.h"
#include "providers/health/health_probe.h"

namespace berth {
namespace {

/// "1,32,128" -> {1, 32, 128}; an error names the bad part.
Result<std::vector<int>> ParseLevels(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string part =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int v = 0;
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v < 1 || v > 10000)
      return Status::InvalidArgument("--concurrency: '" + part +
                                     "' is not a number of streams from 1 to 10000 (give a "
                                     "comma-separated list such as 1,32,128)");
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

/// --num-prompts, --request-rate, --seed, --warmup and --goodput, parsed.
struct LoadOptions {
  uint64_t num_prompts = 0;
  double request_rate = 0;
  uint64_t seed = 0;
  uint64_t warmup_requests = 0;
  uint64_t warmup_ms = 0;
  double ttft_ms = 0, tpot_ms = 0, e2e_ms = 0;
};

std::optional<uint64_t> ParseCount(std::string_view text) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<double> ParseNumber(std::string_view text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

/// The options of how requests are sent; an error names the flag and the value.
Result<LoadOptions> ParseLoadOptions(const BenchCommand& cmd) {
  LoadOptions o;
  if (!cmd.num_prompts.empty()) {
    std::optional<uint64_t> n = ParseCount(cmd.num_prompts);
    if (!n || *n == 0 || *n > 100000000)
      return Status::InvalidArgument("--num-prompts: '" + cmd.num_prompts +
                                     "' is not a number of requests from 1 to 100000000");
    o.num_prompts = *n;
  }
  if (!cmd.request_rate.empty() && cmd.request_rate != "inf") {
    std::optional<double> r = ParseNumber(cmd.request_rate);
    if (!r || *r <= 0 || *r > 1e6)
      return Status::InvalidArgument(
          "--request-rate: '" + cmd.request_rate +
          "' is not a number of requests per second above 0 (or inf, the default: each stream "
          "sends its next request at once)");
    o.request_rate = *r;
  }
  std::optional<uint64_t> seed = ParseCount(cmd.seed);
  if (!seed) return Status::InvalidArgument("--seed: '" + cmd.seed + "' is not a whole number");
  o.seed = *seed;
  if (!cmd.warmup.empty()) {
    if (std::optional<uint64_t> n = ParseCount(cmd.warmup); n && *n <= 1000000) {
      o.warmup_requests = *n;
    } else if (std::optional<uint64_t> ms = ParseDurationMs(cmd.warmup)) {
      o.warmup_ms = *ms;
    } else {
      return Status::InvalidArgument("--warmup: '" + cmd.warmup +
                                     "' is neither a number of requests (such as 10) nor a "
                                     "duration (such as 30s)");
    }
  }
  size_t pos = 0;
  while (!cmd.goodput.empty() && pos <= cmd.goodput.size()) {
    size_t comma = cmd.goodput.find(',', pos);
    std::string part = cmd.goodput.substr(pos, comma == std::string::npos ? comma : comma - pos);
    size_t colon = part.find(':');
    std::string name = part.substr(0, colon);
    double ms = -1;  // a plain double: g++ 12 warns falsely (-Wmaybe-uninitialized) of an optional
    if (colon != std::string::npos) ms = ParseNumber(part.substr(colon + 1)).value_or(-1);
    double* limit = name == "ttft"                    ? &o.ttft_ms
                    : name == "tpot"                  ? &o.tpot_ms
                    : name == "e2el" || name == "e2e" ? &o.e2e_ms
                                                      : nullptr;
    if (!limit || ms <= 0)
      return Status::InvalidArgument(
          "--goodput: '" + part +
          "' is not NAME:MS (NAME one of ttft, tpot, e2el; MS milliseconds above 0); give "
          "them comma-separated, such as ttft:500,tpot:50,e2el:20000");
    *limit = ms;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return o;
}

/// The commit the service's model runs at, as far as berth can tell without asking the server:
/// a pinned revision, berth.lock, what berth last downloaded, or the store's ref.
std::string ModelCommit(const Desired& d, const ModelSpec& m, const std::string& state_dir) {
  if (IsCommit(m.revision)) return m.revision;
  if (const LockEntry* pin = d.PinFor(m)) return pin->commit;
  auto state = StateDir(state_dir).Load();
  if (state.ok()) {
    auto it = state->applied.find("model/" + m.name);
    if (it != state->applied.end() && IsCommit(it->second)) return it->second;
  }
  std::string store = d.host.store.empty() ? DefaultStorePath() : d.host.store;
  Result<std::string> ref =
      ReadRegularFile(store + "/" + RepoFolderName(m.repo_id) + "/refs/" + m.revision,
                      {.max_bytes = kMaxRefFileBytes});
  std::string commit = ref.ok() ? ref->substr(0, ref->find('\n')) : "";
  return IsCommit(commit) ? commit : "";
}

BenchLevel ToLevel(const LoadFigures& r) {
  BenchLevel l;
  l.concurrency = r.concurrency;
  l.requests = r.requests;
  l.errors = r.errors;
  l.output_tokens = r.output_tokens;
  l.seconds = r.seconds;
  l.output_tps = r.output_tps;
  l.ttft_p50_ms = r.ttft_p50_ms;
  l.ttft_p90_ms = r.ttft_p90_ms;
  l.ttft_p99_ms = r.ttft_p99_ms;
  l.itl_p50_ms = r.itl_p50_ms;
  l.itl_p90_ms = r.itl_p90_ms;
  l.itl_p99_ms = r.itl_p99_ms;
  l.first_error = r.first_error;
  l.has_request_figures = true;
  l.cancelled = r.cancelled;
  l.warmup_requests = r.warmup_requests;
  l.request_tps = r.request_tps;
  l.ttft_mean_ms = r.ttft_mean_ms;
  l.itl_mean_ms = r.itl_mean_ms;
  l.tpot_mean_ms = r.tpot_mean_ms;
  l.tpot_p50_ms = r.tpot_p50_ms;
  l.tpot_p90_ms = r.tpot_p90_ms;
  l.tpot_p99_ms = r.tpot_p99_ms;
  l.e2e_mean_ms = r.e2e_mean_ms;
  l.e2e_p50_ms = r.e2e_p50_ms;
  l.e2e_p90_ms = r.e2e_p90_ms;
  l.e2e_p99_ms = r.e2e_p99_ms;
  l.user_tps_mean = r.user_tps_mean;
  l.user_tps_p50 = r.user_tps_p50;
  l.has_goodput = r.has_goodput;
  l.good_requests = r.good_requests;
  l.goodput_rps = r.goodput_rps;
  l.server_requests = r.server_requests;
  l.server_output_tokens = r.server_output_tokens;
  l.server_decode_ms = r.server_decode_ms;
  l.server_tpot_mean_ms = r.server_tpot_mean_ms;
  return l;
}

int RunCompare(const BenchCommand& cmd, const std::string& state_dir, std::ostream& out,
               std::ostream& err) {
  auto records = BenchHistory(state_dir).Load();
  if (!records.ok()) {
    err << "berth bench --compare: " << records.status().message() << "\n";
    return kExitError;
  }
  auto columns = LatestPerKey(*records, cmd.services);
  if (columns.empty() && !cmd.services.empty() && cmd.format == "text") {
    err << "berth bench --compare: no benchmark of " << cmd.services[0]
        << (cmd.services.size() > 1 ? " (or the other services named)" : "") << " in " << state_dir
        << "/bench.json; run berth bench SERVICE -f MANIFEST first\n";
    return kExitError;
  }
  out << (cmd.format == "json" ? BenchCompareJson(columns) : BenchCompareText(columns));
  return kExitOk;
}

}  // namespace

int RunBench(const BenchCommand& cmd, std::ostream& out, std::ostream& err) {
  if (cmd.format != "text" && cmd.format != "json") {
    err << "berth bench: unknown output format '" << cmd.format << "' (use text or json)\n";
    return kExitError;
  }
  std::string state_dir = cmd.state_dir.empty() ? DefaultStateDir() : cmd.state_dir;
  if (cmd.compare) return RunCompare(cmd, state_dir, out, err);

  if (cmd.services.size() != 1 || cmd.manifest_path.empty()) {
    err << "berth bench: give one SERVICE and the manifest that declares it (-f MANIFEST), or "
           "--compare to see recorded results\n";
    return kExitError;
  }
  auto levels = ParseLevels(cmd.concurrency);
  std::optional<uint64_t> duration_ms = ParseDurationMs(cmd.duration);
  if (!levels.ok() || !duration_ms || *duration_ms == 0 || cmd.prompt_tokens < 1 ||
      cmd.max_tokens < 1) {
    err << "berth bench: "
        << (!levels.ok() ? levels.status().message()
            : !duration_ms || *duration_ms == 0
                ? "--duration: '" + cmd.duration + "' is not a duration such as 30s or 2m"
                : std::string("--prompt-tokens and --max-tokens must be at least 1"))
        << "\n";
    return kExitError;
  }
  Result<LoadOptions> options = ParseLoadOptions(cmd);
  if (!options.ok()) {
    err << "berth bench: " << options.status().message() << "\n";
    return kExitError;
  }
  Desired desired;
  if (!LoadManifestOrExplain(cmd.manifest_path, &desired, err)) return kExitError;
  const std::string& name = cmd.services[0];
  auto it = desired.services.find(name);
  if (it == desired.services.end()) {
    std::string names;
    for (const auto& [n, s] : desired.services) names += (names.empty() ? "" : ", ") + n;
    err << "berth bench: " << cmd.manifest_path << " declares no service '" << name
        << "' (it declares: " << (names.empty() ? "none" : names) << ")\n";
    return kExitError;
  }
  const ServiceSpec& svc = it->second;
  if (!svc.has_engine || !svc.port) {
    err << "berth bench: " << name << " has " << (svc.has_engine ? "no port" : "no engine")
        << " in " << cmd.manifest_path
        << ", so berth does not know where it serves or under which model name; declare its "
           "engine and port to benchmark it\n";
    return kExitError;
  }
  BenchRecord rec;
  rec.service = name;
  rec.served_name = svc.ServedName();
  rec.engine = EngineName(svc.engine);
  rec.chat = cmd.chat;
  rec.prompt_tokens = cmd.prompt_tokens;
  rec.max_tokens = cmd.max_tokens;
  rec.duration_s = options->num_prompts ? 0 : static_cast<double>(*duration_ms) / 1000.0;
  rec.num_prompts = options->num_prompts;
  rec.request_rate = options->request_rate;
  rec.seed = options->seed;
  rec.warmup = cmd.warmup;
  rec.goodput_ttft_ms = options->ttft_ms;
  rec.goodput_tpot_ms = options->tpot_ms;
  rec.goodput_e2e_ms = options->e2e_ms;
  if (auto m = desired.models.find(svc.model); m != desired.models.end()) {
    rec.model = m->first;
    rec.repo_id = m->second.repo_id;
    rec.commit = ModelCommit(desired, m->second, state_dir);
  }
  // The name the server lists may not be the manifest's (trtllm-serve lists its snapshot
  // folder's name, the commit): its adapter says.
  RenderContext snapshot;
  if (!rec.commit.empty()) snapshot.snapshot_path = SnapshotPath("", rec.repo_id, rec.commit);
  if (std::string reported = AdapterFor(svc.engine).ReportedName(svc, snapshot); !reported.empty())
    rec.served_name = reported;
  std::string host = cmd.host.empty() ? svc.DialHost() : cmd.host;
  std::string endpoint = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                         std::to_string(*svc.port);

  CurlHealthProbe probe;
  HealthResult health = probe.Probe(host, *svc.port, svc.health.path, rec.served_name);
  if (!health.healthy) {
    err << "berth bench: " << name << " is not healthy, so nothing was measured: " << health.detail
        << "\nStart it with berth apply -f " << cmd.manifest_path
        << ", or wait until it is healthy, then run berth bench again.\n";
    return kExitError;
  }

  rec.time = NowRfc3339(RealClock());
  if (cmd.format == "text") out << BenchHeaderText(rec, endpoint) << std::flush;
  bool all_failed = false;
  for (int c : *levels) {
    err << "berth bench: " << c << " stream" << (c == 1 ? "" : "s") << " for "
        << (options->num_prompts ? std::to_string(options->num_prompts) + " requests"
                                 : cmd.duration)
        << "...\n";
    LoadSpec spec;
    spec.host = host;
    spec.port = *svc.port;
    spec.model = rec.served_name;
    spec.chat = cmd.chat;
    spec.prompt_tokens = cmd.prompt_tokens;
    spec.max_tokens = cmd.max_tokens;
    spec.concurrency = c;
    spec.duration = std::chrono::milliseconds(*duration_ms);
    spec.num_prompts = options->num_prompts;
    spec.request_rate = options->request_rate;
    spec.seed = options->seed;
    spec.warmup_requests = options->warmup_requests;
    spec.warmup_duration = std::chrono::milliseconds(options->warmup_ms);
    spec.goodput_ttft_ms = options->ttft_ms;
    spec.goodput_tpot_ms = options->tpot_ms;
    spec.goodput_e2e_ms = options->e2e_ms;
    spec.gather = std::chrono::microseconds(cmd.gather_us);
    auto r = RunLoad(spec, cmd.stop);
    if (!r.ok()) {
      err << "berth bench: " << r.status().message() << "\n";
      return kExitError;
    }
    rec.levels.push_back(ToLevel(*r));
    all_failed = all_failed || (r->errors > 0 && r->output_tokens == 0);
    if (cmd.stop && cmd.stop->load()) break;
  }
  if (cmd.format == "json")
    out << BenchRecordToJson(rec);
  else
    out << "\n" << BenchLevelsText(rec);
  int code = all_failed ? kExitFailed : kExitOk;
  if (cmd.save && !(cmd.stop && cmd.stop->load())) {
    Status saved = BenchHistory(state_dir).Append(rec);
    if (!saved.ok()) {
      err << "berth bench: the figures above were not recorded: " << saved.message()
          << " (use --state-dir DIR, or --no-save)\n";
      return kExitError;
    }
    if (cmd.format == "text")
      out << "recorded in " << BenchHistory(state_dir).path()
          << "; berth bench --compare shows it beside the others\n";
  }
  if (all_failed)
    err << "berth bench: every request of a level failed; see the first error above\n";
  return code;
}

}  // namespace berth
