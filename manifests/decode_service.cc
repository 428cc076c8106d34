#include "manifests/decode_service.h"

#include <algorithm>
#include <climits>
#include <optional>
#include <string>

#include "core/units.h"
#include "manifests/decode_engines.h"
#include "manifests/names.h"
#include "planners/servers/adapter.h"
#include "planners/servers/vllm.h"

namespace berth::manifests {
namespace {

constexpr std::string_view kServiceKeys[] = {
    "model",        "engine",    "state",     "gpus",         "port",         "bind",
    "executable",   "vllm",      "sglang",    "llama_server", "trtllm",       "command",
    "served_name",  "args",      "env",       "env_file",     "gpu_memory",   "health",
    "strategy",     "adopt",     "preflight", "gates",        "backend_port", "standby",
    "stop_timeout", "on_demand", "idle_stop", "swap_group",   "server_port"};
constexpr std::string_view kEngines[] = {"vllm", "sglang", "llama-server", "trtllm-serve",
                                         "command"};
constexpr std::string_view kStates[] = {"running", "stopped", "absent"};
constexpr std::string_view kStrategies[] = {"auto", "stop-first", "start-first"};
constexpr std::string_view kStandbys[] = {"stop", "sleep"};
constexpr std::string_view kHealthKeys[] = {"path", "timeout", "interval"};
constexpr std::string_view kPreflightKeys[] = {"command", "timeout", "engine"};
constexpr std::string_view kOnOff[] = {"on", "off"};
constexpr std::string_view kGateKinds[] = {"smoke", "floor", "soak"};
constexpr std::string_view kSoakKeys[] = {"duration",          "max_restarts",   "interval",
                                          "max_failed_probes", "max_error_rate", "min_requests"};
constexpr std::string_view kFloorKeys[] = {
    "concurrency", "duration",      "output_tps", "ttft_p50",          "ttft_p99",
    "max_tokens",  "prompt_tokens", "relative",   "without_reference", "goodput"};
constexpr std::string_view kRelativeKeys[] = {"output_tps", "ttft_p50", "ttft_p99", "tpot_p50",
                                              "goodput"};
constexpr std::string_view kGoodputKeys[] = {"ttft", "tpot", "e2el", "min_rps"};
constexpr std::string_view kWithoutReference[] = {"absolute", "refuse"};
constexpr std::string_view kSmokeKeys[] = {"api", "prompt", "max_tokens", "timeout"};
constexpr std::string_view kSmokeApis[] = {"completions", "chat"};

constexpr const char* kNeedsEngine =
    "add engine: vllm|sglang|llama-server|trtllm-serve|command, or remove it";

// The engine an options block belongs to ("llama_server" -> kLlamaServer).
std::optional<EngineKind> BlockEngine(const std::string& key) {
  if (key == "vllm") return EngineKind::kVllm;
  if (key == "sglang") return EngineKind::kSglang;
  if (key == "llama_server") return EngineKind::kLlamaServer;
  if (key == "trtllm") return EngineKind::kTrtllm;
  return std::nullopt;
}

EngineKind ToEngine(const std::string& name) {
  if (name == "vllm") return EngineKind::kVllm;
  if (name == "sglang") return EngineKind::kSglang;
  if (name == "llama-server") return EngineKind::kLlamaServer;
  if (name == "trtllm-serve") return EngineKind::kTrtllm;
  return EngineKind::kCommand;
}

// Whether `path` can go into an HTTP request line as it is: printable ASCII, no space.
bool UrlPathBytes(const std::string& path) {
  for (unsigned char c : path)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}

void DecodeHealth(YamlReader& r, const Field& block, HealthSpec* h) {
  for (const Field& f : r.Entries(block.value, kHealthKeys, "in health")) {
    if (f.key == "path") {
      std::optional<std::string> v = r.String(f);
      if (v && (v->empty() || (*v)[0] != '/')) {
        r.Error(f.value_loc, "health 'path' must start with '/', got '" + *v + "'");
      } else if (v && !UrlPathBytes(*v)) {
        // A CR or LF would end berth's request line early and add headers of the manifest's.
        r.Error(f.value_loc,
                "health 'path' must be printable ASCII without spaces or control characters "
                "(percent-encode anything else), got '" +
                    *v + "'");
      } else if (v) {
        h->path = *v;
      }
    } else if (f.key == "timeout") {
      if (auto v = r.DurationMs(f)) h->timeout_ms = *v;
    } else if (f.key == "interval") {
      if (auto v = r.DurationMs(f)) h->interval_ms = *v;
    }
  }
}

void DecodePreflight(YamlReader& r, const Field& block, std::optional<PreflightSpec>* out) {
  PreflightSpec p;
  bool has_command = false, has_engine = false;
  for (const Field& f : r.Entries(block.value, kPreflightKeys, "in preflight")) {
    if (f.key == "engine") {
      has_engine = true;
      if (auto v = r.Enum(f, kOnOff)) p.engine_check = *v == "on";
    } else if (f.key == "command") {
      has_command = true;
      std::optional<std::vector<std::string>> argv = r.StringList(f, false);
      if (argv && argv->empty()) {
        r.Error(f.value_loc, "preflight 'command' must not be empty",
                "e.g. command: [/opt/vllm/bin/python, /etc/berth/check_arch.py]");
      } else if (argv && ((*argv)[0].empty() || (*argv)[0][0] != '/')) {
        r.Error(r.Loc(*f.value.begin()),
                "the first element of preflight 'command' must be an absolute path, got '" +
                    (*argv)[0] + "'",
                "berth runs it without a shell or PATH lookup");
      } else if (argv) {
        p.command = *argv;
      }
    } else if (f.key == "timeout") {
      if (auto v = r.DurationMs(f)) p.timeout_ms = *v;
    }
  }
  if (!has_command && !has_engine)
    r.Error(block.key_loc, "preflight needs 'command' or 'engine'",
            "e.g. preflight: {command: [/usr/local/bin/check-model, --arch]}, or "
            "preflight: {engine: off} to skip the engine check");
  if (!p.command.empty() || has_engine) *out = p;
}

void DecodeSmoke(YamlReader& r, const Field& block, std::optional<SmokeSpec>* out) {
  SmokeSpec s;
  if (!block.value.IsNull() && !r.ExpectMap(block)) return;
  if (block.value.IsMap())
    for (const Field& f : r.Entries(block.value, kSmokeKeys, "in gates.smoke")) {
      if (f.key == "api") {
        if (auto v = r.Enum(f, kSmokeApis)) s.api = *v;
      } else if (f.key == "prompt") {
        std::optional<std::string> v = r.Text(f);
        if (v && v->empty())
          r.Error(f.value_loc, "smoke 'prompt' must not be empty");
        else if (v)
          s.prompt = *v;
      } else if (f.key == "max_tokens") {
        if (auto v = r.Int(f, 1, 1 << 20)) s.max_tokens = static_cast<int>(*v);
      } else if (f.key == "timeout") {
        if (auto v = r.DurationMs(f)) s.timeout_ms = *v;
      }
    }
  *out = s;
}

// `relative: {output_tps: 0.9, ttft_p50: 1.1, ...}`: ratios to the replaced service's figures.
void DecodeRelative(YamlReader& r, const Field& block, FloorSpec* s) {
  if (!r.ExpectMap(block)) return;
  for (const Field& f : r.Entries(block.value, kRelativeKeys, "in gates.floor.relative")) {
    std::optional<double> v = r.Number(f);
    if (!v) continue;
    if (*v <= 0 || *v > 10) {
      r.Error(f.value_loc,
              "floor relative '" + f.key + "' must be a ratio above 0 and at most 10 (e.g. 0.9 " +
                  "for output_tps: at least 90% of the replaced service's; 1.1 for a latency: " +
                  "at most 110% of it)");
      continue;
    }
    if (f.key == "output_tps") s->rel_output_tps = *v;
    if (f.key == "ttft_p50") s->rel_ttft_p50 = *v;
    if (f.key == "ttft_p99") s->rel_ttft_p99 = *v;
    if (f.key == "tpot_p50") s->rel_tpot_p50 = *v;
    if (f.key == "goodput") s->rel_goodput = *v;
  }
}

// `goodput: {ttft: 500ms, tpot: 50ms, e2el: 10s, min_rps: 2}`: what makes a request good.
void DecodeGoodput(YamlReader& r, const Field& block, FloorSpec* s) {
  if (!r.ExpectMap(block)) return;
  for (const Field& f : r.Entries(block.value, kGoodputKeys, "in gates.floor.goodput")) {
    if (f.key == "min_rps") {
      if (auto v = r.Number(f)) {
        if (*v <= 0)
          r.Error(f.value_loc,
                  "floor goodput 'min_rps' must be above 0 (good requests per second)");
        else
          s->min_goodput_rps = *v;
      }
      continue;
    }
    std::optional<uint64_t> v = r.DurationMs(f);
    if (!v) continue;
    if (*v == 0) {
      r.Error(f.value_loc, "floor goodput '" + f.key + "' must be above 0 (e.g. 500ms)");
      continue;
    }
    if (f.key == "ttft") s->goodput_ttft_ms = *v;
    if (f.key == "tpot") s->goodput_tpot_ms = *v;
    if (f.key == "e2el") s->goodput_e2el_ms = *v;
  }
}

void DecodeFloor(YamlReader& r, const Field& block, std::optional<FloorSpec>* out) {
  FloorSpec s;
  if (!r.ExpectMap(block)) return;
  // A relative: block with an invalid ratio says so where it is written, and only there.
  bool relative_written = false;
  std::optional<SourceLoc> goodput;  // where goodput: is written
  for (const Field& f : r.Entries(block.value, kFloorKeys, "in gates.floor")) {
    if (f.key == "concurrency") {
      if (auto v = r.Int(f, 1, 4096)) s.concurrency = static_cast<int>(*v);
    } else if (f.key == "duration") {
      if (auto v = r.DurationMs(f)) {
        if (*v < 1000 || *v > 3600 * 1000)
          r.Error(f.value_loc, "floor 'duration' must be between 1s and 1h");
        else
          s.duration_ms = *v;
      }
    } else if (f.key == "output_tps") {
      if (auto v = r.Number(f)) {
        if (*v <= 0)
          r.Error(f.value_loc, "floor 'output_tps' must be above 0 (output tokens per second)");
        else
          s.output_tps = *v;
      }
    } else if (f.key == "ttft_p50") {
      if (auto v = r.DurationMs(f)) s.ttft_p50_ms = *v;
    } else if (f.key == "ttft_p99") {
      if (auto v = r.DurationMs(f)) s.ttft_p99_ms = *v;
    } else if (f.key == "max_tokens") {
      if (auto v = r.Int(f, 1, 1 << 20)) s.max_tokens = static_cast<int>(*v);
    } else if (f.key == "prompt_tokens") {
      if (auto v = r.Int(f, 1, 1 << 20)) s.prompt_tokens = static_cast<int>(*v);
    } else if (f.key == "relative") {
      relative_written = true;
      DecodeRelative(r, f, &s);
    } else if (f.key == "without_reference") {
      if (auto v = r.Enum(f, kWithoutReference)) s.refuse_without_reference = *v == "refuse";
    } else if (f.key == "goodput") {
      goodput = f.key_loc;
      DecodeGoodput(r, f, &s);
    }
  }
  if (goodput && !s.has_goodput()) {
    r.Error(*goodput, "gates.floor.goodput sets no limit of a good request",
            "add ttft, tpot or e2el, e.g. goodput: {ttft: 500ms, tpot: 50ms}");
    return;
  }
  if ((s.rel_goodput > 0 || s.min_goodput_rps > 0) && !s.has_goodput()) {
    r.Error(block.key_loc, "gates.floor compares goodput but does not say what a good request is",
            "add goodput: {ttft: ..., tpot: ..., e2el: ...} (any of them) to gates.floor");
    return;
  }
  if (s.output_tps <= 0 && s.ttft_p50_ms == 0 && s.ttft_p99_ms == 0 && s.min_goodput_rps <= 0 &&
      !s.relative()) {
    if (relative_written) return;
    r.Error(block.key_loc, "gates.floor sets no limit",
            "add output_tps, ttft_p50, ttft_p99, goodput.min_rps or relative:, e.g. floor: "
            "{concurrency: 32, "
            "output_tps: 1000} or floor: {relative: {output_tps: 0.9}}");
    return;
  }
  *out = s;
}

void DecodeSoak(YamlReader& r, const Field& block, std::optional<SoakSpec>* out) {
  SoakSpec s;
  if (!r.ExpectMap(block)) return;
  for (const Field& f : r.Entries(block.value, kSoakKeys, "in gates.soak")) {
    if (f.key == "duration") {
      if (auto v = r.DurationMs(f)) {
        if (*v < 1000 || *v > 24 * 3600 * 1000)
          r.Error(f.value_loc, "soak 'duration' must be between 1s and 24h");
        else
          s.duration_ms = *v;
      }
    } else if (f.key == "interval") {
      if (auto v = r.DurationMs(f)) {
        if (*v < 100 || *v > 3600 * 1000)
          r.Error(f.value_loc, "soak 'interval' must be between 100ms and 1h");
        else
          s.interval_ms = *v;
      }
    } else if (f.key == "max_restarts") {
      if (auto v = r.Int(f, 0, 1000)) s.max_restarts = static_cast<int>(*v);
    } else if (f.key == "max_failed_probes") {
      if (auto v = r.Int(f, 1, 1000)) s.max_failed_probes = static_cast<int>(*v);
    } else if (f.key == "min_requests") {
      if (auto v = r.Int(f, 1, 1 << 30)) s.min_requests = static_cast<int>(*v);
    } else if (f.key == "max_error_rate") {
      if (auto v = r.Number(f)) {
        if (*v < 0 || *v > 1)
          r.Error(f.value_loc,
                  "soak 'max_error_rate' must be between 0 and 1 (a share of the requests, "
                  "0.05 for 5%)");
        else
          s.max_error_rate = *v;
      }
    }
  }
  if (s.interval_ms > s.duration_ms) s.interval_ms = s.duration_ms;
  *out = s;
}

void DecodeGates(YamlReader& r, const Field& block, GatesSpec* g) {
  for (const Field& f : r.Entries(block.value, kGateKinds, "in gates")) {
    if (f.key == "smoke") DecodeSmoke(r, f, &g->smoke);
    if (f.key == "floor") DecodeFloor(r, f, &g->floor);
    if (f.key == "soak") DecodeSoak(r, f, &g->soak);
  }
}

// The variables berth itself sets in every unit: an env entry would silently override them.
bool IsBerthManaged(const std::string& key) {
  return key == "CUDA_VISIBLE_DEVICES" || key == "HF_HUB_OFFLINE" || key == "HF_HUB_CACHE";
}

// EnvironmentFile= takes the rest of its line as written: no control character, no space at
// either end (systemd drops it), no trailing backslash (it would join the next line).
bool EnvFileOk(YamlReader& r, const Field& f, const std::string& path) {
  if (!r.UnitValue(f.value_loc, f.key, path)) return false;
  if (path.back() == ' ' || path.back() == '\\') {
    r.Error(f.value_loc, "'env_file' must not end with a space or a backslash, got '" + path + "'");
    return false;
  }
  return true;
}

// HF_TOKEN, OPENAI_API_KEY, DB_PASSWORD, ...: names that carry credentials by convention. A part
// counts as a whole word between '_' (or the ends), so MAX_TOKENS_PER_SECOND is no secret.
bool LooksSecret(const std::string& key) {
  std::string k;
  for (char c : key) k += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (std::string part : {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY",
                           "PRIVATE_KEY", "CREDENTIAL", "CREDENTIALS", "SECRETS"})
    for (size_t at = k.find(part); at != std::string::npos; at = k.find(part, at + 1)) {
      bool starts = at == 0 || k[at - 1] == '_';
      size_t end = at + part.size();
      bool ends = end == k.size() || k[end] == '_';
      if (starts && ends) return true;
    }
  return false;
}

void DecodeEnv(YamlReader& r, const Field& block, std::optional<EngineKind> engine,
               std::map<std::string, std::string>* env) {
  for (const Field& f : r.NamedEntries(block.value, "in env")) {
    if (!IsEnvKey(f.key)) {
      r.Error(f.key_loc, "'" + f.key + "' is not a valid environment variable name",
              "use letters, digits and '_', not starting with a digit");
      continue;
    }
    if (LooksSecret(f.key)) {
      // Unit files are world-readable and end up in plans and reviews: secrets stay out.
      r.Error(f.key_loc,
              "'" + f.key + "' looks like a secret; berth never writes secrets into unit files",
              "put it in a file readable only by root and name it with env_file:");
      continue;
    }
    if (IsBerthManaged(f.key)) {
      r.Error(f.key_loc, "'" + f.key + "' is set by berth; env cannot set it",
              "berth sets CUDA_VISIBLE_DEVICES from 'gpus' and HF_HUB_OFFLINE and HF_HUB_CACHE "
              "from the store");
      continue;
    }
    if (std::optional<std::string> why =
            engine == EngineKind::kVllm ? VllmObsoleteEnv(f.key) : std::nullopt) {
      r.Error(f.key_loc, "'" + f.key + "' " + *why, "remove it from env");
      continue;
    }
    if (auto v = r.Text(f); v && r.UnitValue(f.value_loc, f.key, *v, UnitTextUse::kQuoted))
      (*env)[f.key] = *v;
  }
}

// argparse keeps a flag's last value, so an `args` entry naming a flag berth renders would
// silently win over the key that sets it (and the health gate would probe the wrong port).
void RefuseOwnedFlags(YamlReader& r, const ServiceSpec& s, const Field* args) {
  if (args == nullptr || s.args.empty() || !args->value.IsSequence()) return;
  std::optional<ArgConflict> c = FindOwnedFlag(s, s.args);
  if (!c) return;
  const std::string key = c->set_by;
  r.Error(r.Loc(args->value[c->index]), c->flag + " is set by `" + key + ":`; args cannot set it",
          "remove it from args, and change `" + key + ":` instead");
}

// on_demand, idle_stop, swap_group and server_port together: the last three only with the
// first, which needs a unit berth writes with a port. Sets d->spec.on_demand.
void CheckOnDemand(YamlReader& r, const Field& entry, bool has_port, const SourceLoc& idle_stop_loc,
                   std::optional<OnDemandSpec> od, uint64_t idle_stop,
                   const std::string& swap_group, ServiceDraft* d) {
  ServiceSpec& s = d->spec;
  const char* hint = "add on_demand: true, or remove it";
  if (!od) {
    if (idle_stop_loc.line)
      r.Error(idle_stop_loc, "'idle_stop' applies only to an on-demand service", hint);
    if (d->swap_group_loc.line)
      r.Error(d->swap_group_loc,
              "'swap_group' applies only to on-demand services: its members take turns, each "
              "started by its first request",
              hint);
    if (d->server_port_loc.line)
      r.Error(d->server_port_loc, "'server_port' applies only to an on-demand service", hint);
    return;
  }
  if (!s.has_engine)
    r.Error(d->on_demand_loc,
            "on_demand needs an engine: berth writes the model server's unit, which the first "
            "request starts",
            "add engine: and model:, or remove on_demand");
  else if (!has_port)
    r.Error(d->on_demand_loc, "on_demand needs the service's 'port': the socket holds it",
            "add port:");
  if (s.standby == Standby::kSleep)
    r.Error(d->on_demand_loc, "on_demand and standby: sleep do not go together",
            "an idle on-demand server stops; remove standby");
  if (!s.gates.empty())
    r.Error(entry.key_loc,
            "gates need a start by berth, and an on-demand service is started by its first "
            "request",
            "remove gates, or on_demand");
  od->idle_stop_ms = idle_stop;
  od->swap_group = swap_group;
  s.on_demand = std::move(od);
}

}  // namespace

ServiceDraft DecodeService(YamlReader& r, const Field& entry) {
  ServiceDraft d;
  ServiceSpec& s = d.spec;
  s.name = entry.key;
  s.loc = entry.key_loc;
  if (std::string problem = UnitNameProblem(entry.key); !problem.empty()) {
    r.Error(entry.key_loc, "'" + entry.key + "' is not a valid systemd unit name: " + problem,
            "use letters, digits, ':', '_', '.' and '-'");
  }
  if (!r.ExpectMap(entry)) return d;
  const std::string where = "in service '" + entry.key + "'";
  std::vector<Field> fields = r.Entries(entry.value, kServiceKeys, where);

  // The engine decides which keys apply, so read it first.
  std::optional<EngineKind> engine;
  for (const Field& f : fields) {
    if (f.key != "engine") continue;
    s.has_engine = true;
    if (auto name = r.Enum(f, kEngines)) engine = ToEngine(*name);
  }
  if (engine) s.engine = *engine;

  bool has_model = false, has_port = false, has_command = false;
  std::optional<std::vector<int>> gpus;
  const Field* gpus_field = nullptr;
  const Field* vllm_block = nullptr;
  const Field* sglang_block = nullptr;
  const Field* trtllm_block = nullptr;
  bool has_model_file = false;
  const Field* args_field = nullptr;
  bool tp_ok = true;
  std::optional<OnDemandSpec> od;  // on_demand: true
  SourceLoc idle_stop_loc;
  uint64_t idle_stop = OnDemandSpec{}.idle_stop_ms;
  std::string swap_group;
  for (const Field& f : fields) {
    // A state-only service may say where it serves and what it holds (berth cannot derive it
    // from a unit it does not write); everything else describes a unit berth would write.
    if (!s.has_engine && f.key != "state" && f.key != "adopt" && f.key != "port" &&
        f.key != "gpus" && f.key != "gpu_memory" && f.key != "health") {
      r.Error(f.key_loc, "'" + f.key + "' needs an engine: " + kNeedsEngine);
      continue;
    }
    if (std::optional<EngineKind> owner = BlockEngine(f.key); owner && engine && owner != engine) {
      r.Error(f.key_loc, "'" + f.key + "' options do not apply to engine " + EngineName(*engine),
              std::string("remove them, or set engine: ") + EngineName(*owner));
      continue;
    }
    if (f.key == "engine") {
      // read above
    } else if (f.key == "state") {
      if (auto v = r.Enum(f, kStates)) {
        s.state = *v == "running"   ? ServiceState::kRunning
                  : *v == "stopped" ? ServiceState::kStopped
                                    : ServiceState::kAbsent;
      }
    } else if (f.key == "adopt") {
      if (auto v = r.Bool(f)) s.adopt = *v;
    } else if (f.key == "model") {
      has_model = true;
      d.model_loc = f.value_loc;
      if (auto v = r.String(f)) s.model = *v;
    } else if (f.key == "gpus") {
      gpus_field = &f;
      gpus = r.DistinctIntList(f, 0);
      if (gpus) s.gpus = *gpus;
    } else if (f.key == "port") {
      has_port = true;
      d.port_loc = f.value_loc;
      if (auto v = r.Int(f, 1, 65535)) s.port = static_cast<int>(*v);
    } else if (f.key == "backend_port") {
      d.backend_port_loc = f.value_loc;
      if (auto v = r.Int(f, 1, 65535)) d.backend_port = static_cast<int>(*v);
    } else if (f.key == "bind") {
      d.bind_loc = f.value_loc;
      std::optional<std::string> v = r.String(f);
      if (v && v->empty()) r.Error(f.value_loc, "'bind' must not be empty");
      if (v && !v->empty() && r.UnitValue(f.value_loc, f.key, *v)) s.bind = *v;
    } else if (f.key == "executable") {
      if (engine == EngineKind::kCommand) {
        r.Error(f.key_loc, "'executable' does not apply to engine command",
                "the first element of 'command' is the executable");
        continue;
      }
      if (auto v = r.AbsolutePath(f); v && r.UnitValue(f.value_loc, f.key, *v)) s.executable = *v;
    } else if (f.key == "vllm") {
      vllm_block = &f;
      tp_ok = r.ExpectMap(f) && DecodeVllm(r, f, &s.vllm, &d.draft_model_loc);
      if (s.vllm.speculative) s.draft_model = s.vllm.speculative->model;
    } else if (f.key == "sglang") {
      sglang_block = &f;
      tp_ok = r.ExpectMap(f) && DecodeSglang(r, f, &s.sglang, &d.draft_model_loc);
      s.draft_model = s.sglang.speculative.draft_model;
    } else if (f.key == "llama_server") {
      if (r.ExpectMap(f)) DecodeLlama(r, f, &s.llama);
      has_model_file = f.value.IsMap() && f.value["model_file"];
    } else if (f.key == "trtllm") {
      trtllm_block = &f;
      tp_ok = r.ExpectMap(f) && DecodeTrtllm(r, f, &s.trtllm);
    } else if (f.key == "served_name") {
      // The other engines are told the name on their command line (served_model_name, alias),
      // or report one berth derives (trtllm-serve); only an operator's command needs saying.
      if (engine && engine != EngineKind::kCommand) {
        r.Error(f.key_loc,
                std::string("'served_name' does not apply to engine ") + EngineName(*engine),
                *engine == EngineKind::kLlamaServer ? "use llama_server.alias"
                : *engine == EngineKind::kTrtllm
                    ? "trtllm-serve lists its model folder's name; berth's gates ask for that"
                    : std::string("use ") + (*engine == EngineKind::kVllm ? "vllm" : "sglang") +
                          ".served_model_name");
        continue;
      }
      std::optional<std::string> v = r.String(f);
      if (v && v->empty())
        r.Error(f.value_loc, "'served_name' must not be empty",
                "remove it: the health gate then checks the health path alone");
      else if (v && r.UnitValue(f.value_loc, f.key, *v))
        s.served_name = *v;
    } else if (f.key == "command") {
      has_command = true;
      if (engine && engine != EngineKind::kCommand) {
        r.Error(f.key_loc, std::string("'command' does not apply to engine ") + EngineName(*engine),
                "remove it, or set engine: command");
        continue;
      }
      std::optional<std::vector<std::string>> argv = r.StringList(f, false);
      if (argv && argv->empty()) {
        r.Error(f.value_loc, "'command' must not be empty", "e.g. command: [/usr/bin/server]");
      } else if (argv && ((*argv)[0].empty() || (*argv)[0][0] != '/')) {
        r.Error(
            r.Loc(*f.value.begin()),
            "the first element of 'command' must be an absolute path, got '" + (*argv)[0] + "'");
      } else if (argv && r.UnitValues(f, *argv, UnitTextUse::kRaw, UnitTextUse::kQuoted)) {
        s.command = *argv;
      }
    } else if (f.key == "args") {
      args_field = &f;
      if (auto v = r.TextList(f);
          v && r.UnitValues(f, *v, UnitTextUse::kQuoted, UnitTextUse::kQuoted))
        s.args = *v;
    } else if (f.key == "env") {
      if (r.ExpectMap(f)) DecodeEnv(r, f, engine, &s.env);
    } else if (f.key == "env_file") {
      if (auto v = r.AbsolutePath(f); v && EnvFileOk(r, f, *v)) s.env_file = *v;
    } else if (f.key == "gpu_memory") {
      if (auto v = r.Size(f)) s.gpu_memory = *v;
    } else if (f.key == "health") {
      if (r.ExpectMap(f)) DecodeHealth(r, f, &s.health);
    } else if (f.key == "stop_timeout") {
      std::optional<uint64_t> v = r.DurationMs(f);
      if (v && (*v < 1000 || *v > ServiceSpec::kMaxStopTimeoutMs))
        r.Error(f.value_loc, "stop_timeout must be between 1s and 4m, got " + FormatDurationMs(*v),
                "berth waits 5m for systemd to stop a service; set a stop_timeout inside it");
      else if (v)
        s.stop_timeout_ms = *v;
    } else if (f.key == "preflight") {
      if (r.ExpectMap(f)) DecodePreflight(r, f, &s.preflight);
    } else if (f.key == "gates") {
      if (r.ExpectMap(f)) DecodeGates(r, f, &s.gates);
    } else if (f.key == "strategy") {
      if (auto v = r.Enum(f, kStrategies)) {
        s.strategy = *v == "auto"         ? Strategy::kAuto
                     : *v == "stop-first" ? Strategy::kStopFirst
                                          : Strategy::kStartFirst;
      }
    } else if (f.key == "on_demand") {
      d.on_demand_loc = f.value_loc;
      if (auto v = r.Bool(f); v && *v && !od) od.emplace();
    } else if (f.key == "idle_stop") {
      idle_stop_loc = f.value_loc;
      std::optional<uint64_t> v = r.DurationMs(f);
      if (v && *v < 1000)
        r.Error(f.value_loc, "idle_stop must be at least 1s, got " + FormatDurationMs(*v),
                "systemd-socket-proxyd's --exit-idle-time counts whole idle periods");
      else if (v)
        idle_stop = *v;
    } else if (f.key == "swap_group") {
      d.swap_group_loc = f.value_loc;
      std::optional<std::string> v = r.String(f);
      if (v && (v->empty() || !UnitNameProblem(*v).empty()))
        r.Error(f.value_loc, "swap_group '" + *v + "' is not a name",
                "use letters, digits, ':', '_', '.' and '-'");
      else if (v)
        swap_group = *v;
    } else if (f.key == "server_port") {
      d.server_port_loc = f.value_loc;
      if (auto v = r.Int(f, 1, 65535)) d.server_port = static_cast<int>(*v);
    } else if (f.key == "standby") {
      d.standby_loc = f.value_loc;
      if (auto v = r.Enum(f, kStandbys)) {
        s.standby = *v == "sleep" ? Standby::kSleep : Standby::kStop;
        // vLLM's sleep mode (level 1); no other engine berth renders has one it can drive.
        if (s.standby == Standby::kSleep && engine && *engine != EngineKind::kVllm)
          r.Error(f.value_loc,
                  std::string("standby: sleep needs engine vllm (its sleep mode); engine ") +
                      EngineName(*engine) + " has none berth can drive",
                  "remove standby, or set standby: stop");
        else if (s.standby == Standby::kSleep && !s.has_engine)
          r.Error(f.value_loc, "standby: sleep needs engine vllm: berth renders its sleep mode",
                  "add engine: vllm, or remove standby");
      }
    }
  }
  CheckOnDemand(r, entry, has_port, idle_stop_loc, std::move(od), idle_stop, swap_group, &d);
  if (s.standby == Standby::kSleep && s.env.count("VLLM_SERVER_DEV_MODE") &&
      s.env.at("VLLM_SERVER_DEV_MODE") != "1")
    r.Error(d.standby_loc,
            "standby: sleep needs VLLM_SERVER_DEV_MODE=1 (vLLM serves its sleep routes only in "
            "dev mode), and env sets it to '" +
                s.env.at("VLLM_SERVER_DEV_MODE") + "'",
            "remove VLLM_SERVER_DEV_MODE from env: berth sets it");
  if (s.gates.soak && !has_port)
    r.Error(entry.key_loc, "gates.soak needs the service's 'port': it probes the server there",
            "add port:, or remove gates.soak");
  if (s.gates.floor && !has_port)
    r.Error(entry.key_loc, "gates.floor needs the service's 'port': it measures the server there",
            "add port:, or remove gates.floor");
  if (s.gates.smoke && !has_port)
    r.Error(entry.key_loc, "gates.smoke needs the service's 'port': it asks the server there",
            "add port:, or remove gates.smoke");
  if (!engine) return d;
  RefuseOwnedFlags(r, s, args_field);

  // What each engine needs.
  const std::string engine_name = EngineName(*engine);
  auto need = [&](bool present, const char* key) {
    if (!present) r.Error(entry.key_loc, "engine " + engine_name + " needs '" + key + "'");
  };
  if (*engine == EngineKind::kCommand) {
    need(has_command, "command");
    return d;
  }
  need(has_model, "model");
  need(has_port, "port");
  if (*engine == EngineKind::kLlamaServer && !has_model_file)
    r.Error(entry.key_loc, "engine llama-server needs 'llama_server.model_file'",
            "llama-server's --model takes a GGUF file, not the snapshot folder: e.g. "
            "llama_server: {model_file: Q4_K_M/model-Q4_K_M.gguf}");
  if (*engine == EngineKind::kLlamaServer) return d;
  if (gpus_field == nullptr) {
    need(false, "gpus");
    return d;
  }
  if (!gpus) return d;
  if (gpus->empty()) {
    r.Error(gpus_field->value_loc, "engine " + engine_name + " needs at least one GPU in 'gpus'");
    return d;
  }
  if (!tp_ok) return d;
  if (std::optional<EngineRefusal> no = AdapterFor(*engine).GpuCountProblem(s, gpus->size())) {
    const Field* block = *engine == EngineKind::kVllm     ? vllm_block
                         : *engine == EngineKind::kSglang ? sglang_block
                                                          : trtllm_block;
    r.Error(block != nullptr ? block->value_loc : gpus_field->value_loc, no->message, no->hint);
  }
  return d;
}

}  // namespace berth::manifests
