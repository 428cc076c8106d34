// The payload of each kind of step: what the executor needs to carry it out, and nothing else.
// An Action holds exactly one of these (Action::step), chosen by its kind (PayloadFits); the
// planner fills it, a saved plan carries it, the executor's runner for that kind reads it.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "core/gate_figures.h"

namespace berth {

/// kDownload: a model's files into the store.
struct DownloadStep {
  std::string repo_id;
  std::string revision;  // as asked
  std::string commit;    // "" : resolved when it runs
  std::vector<std::string> include, exclude;
  friend bool operator==(const DownloadStep&, const DownloadStep&) = default;
};

/// kRemoveModel: a revision (or a whole model) out of the store.
struct RemoveModelStep {
  std::string repo_id;
  std::string commit;
  friend bool operator==(const RemoveModelStep&, const RemoveModelStep&) = default;
};

/// kWriteUnit: the file to write. The file it replaces (as observed, without berth's lineage
/// line; "" for a new unit) and why that text is not known are for the reviewer's diff only: the
/// executor never reads them and a saved plan does not carry them.
struct UnitFileStep {
  std::string content;
  /// A file is there now (the write replaces it: an in-place undo writes it back), and it is not
  /// berth's (adopt: true: a copy goes to the state directory before it is replaced).
  bool replaces = false;
  bool adopts = false;
  /// The file holds text berth did not write (adopted, or edited by hand): the plan always shows
  /// what the write loses.
  bool loses_edits = false;
  std::string old_content;
  std::string old_note;
  friend bool operator==(const UnitFileStep&, const UnitFileStep&) = default;
};

/// kStart, kRestart, kStop, kEnable, kDisable, kRemoveUnit: a unit; Action::unit names it.
struct ServiceStep {
  std::vector<int> gpus;    // start / restart: the GPUs it runs on (side-by-side starts)
  std::string for_service;  // stop: the service whose start needs what it frees
  friend bool operator==(const ServiceStep&, const ServiceStep&) = default;
};

/// kWaitHealthy: GET <path> on host:port until 200 and /v1/models lists served_name ("": the
/// health path alone), probed every interval_ms (after quick first probes) for timeout_ms.
/// port 0: no health check is known (a Replaced service's gate).
struct HealthStep {
  std::string host;  // the address the probe dials (the service's DialHost())
  int port = 0;
  std::string path;
  std::string served_name;
  uint64_t timeout_ms = 0;
  uint64_t interval_ms = 0;
  friend bool operator==(const HealthStep&, const HealthStep&) = default;
};

/// kPreflight: the service's own command (argv, run without a shell, within timeout_ms), or,
/// when `engine` is set, the engine's own validation of the unit: argv is the unit's
/// ExecStart argv, unchanged; the check runs `check_program` (vllm, sglang: a file in
/// ExecutorDeps::engine_check_dir, run by the interpreter of argv[0]) or argv[0] --version
/// (engine "llama-server"), with `env` (the unit's Environment= assignments, "KEY=VALUE" in the
/// unit's order) over systemd's base environment, then the assignments of `env_file` (the
/// unit's EnvironmentFile=, read when the check runs).
struct PreflightStep {
  std::vector<std::string> argv;
  uint64_t timeout_ms = 0;
  std::string engine;
  std::string check_program;
  std::vector<std::string> env;
  std::string env_file;
  friend bool operator==(const PreflightStep&, const PreflightStep&) = default;
};

/// kSmoke: POST http://host:port/v1/<api> for served_name must return text within timeout_ms.
struct SmokeStep {
  std::string host;
  int port = 0;
  std::string served_name;
  std::string api;     // "completions" or "chat"
  std::string prompt;  // the prompt (the user message for chat)
  int max_tokens = 0;
  uint64_t timeout_ms = 0;
  friend bool operator==(const SmokeStep&, const SmokeStep&) = default;
};

/// kFloor: `concurrency` streams for duration_ms, prompts of prompt_tokens words, max_tokens
/// each; output tok/s at least min_output_tps, TTFT p50/p99 at most the maxima (0: unchecked);
/// with `reference_unit`, the relative ratios (0: unchecked) against the figures a kReference
/// step measured on that unit earlier in the run. kReference: the same load on the service the
/// switch replaces (Action::unit), whose floor gate then compares with it; it never fails.
struct FloorStep {
  std::string host;
  int port = 0;
  std::string served_name;
  int concurrency = 0;
  int prompt_tokens = 0;
  int max_tokens = 0;
  uint64_t duration_ms = 0;
  double min_output_tps = 0;
  uint64_t max_ttft_p50_ms = 0;
  uint64_t max_ttft_p99_ms = 0;
  double rel_output_tps = 0;  // at least this times the reference's output tok/s
  double rel_ttft_p50 = 0;    // at most this times the reference's TTFT p50
  double rel_ttft_p99 = 0;    // at most this times the reference's TTFT p99
  double rel_tpot_p50 = 0;    // at most this times the reference's TPOT p50
  double rel_goodput = 0;     // at least this times the reference's goodput (req/s)
  /// Goodput: a finished request is good when it meets every limit given (0: not a limit);
  /// at least min_goodput_rps good requests per second (0: unchecked).
  uint64_t goodput_ttft_ms = 0, goodput_tpot_ms = 0, goodput_e2el_ms = 0;
  double min_goodput_rps = 0;
  std::string reference_unit;  // kFloor: whose reference it compares with; "": none
  /// kFloor: no reference figures when it runs fails the gate (else the absolute limits alone).
  bool refuse_without_reference = false;
  /// kFloor: the reference's figures berth recorded earlier (its settings and this load), for
  /// when it cannot be measured before the switch (it does not serve, or the measurement
  /// failed); empty: none.
  GateFigures recorded;
  /// What the measured service runs: the model commit and the unit's RestartDigest, recorded
  /// with its figures (BerthState::gate_figures); "" when berth cannot tell.
  std::string commit;
  std::string settings;
  bool relative() const {
    return rel_output_tps > 0 || rel_ttft_p50 > 0 || rel_ttft_p99 > 0 || rel_tpot_p50 > 0 ||
           rel_goodput > 0;
  }
  bool has_goodput() const { return goodput_ttft_ms || goodput_tpot_ms || goodput_e2el_ms; }
  friend bool operator==(const FloorStep&, const FloorStep&) = default;
};

/// kSoak: for duration_ms, every interval_ms: the unit still up and restarted by systemd at most
/// max_restarts times since the soak began, GET <path> on host:port (port 0: not probed) failing
/// at most max_failed_probes times in a row; behind a front (front_socket set), the share of the
/// requests the front sent to front_server answered 5xx at most max_error_rate once at least
/// min_requests were sent.
struct SoakStep {
  std::string host;
  int port = 0;
  std::string path;
  std::string served_name;
  uint64_t duration_ms = 0;
  uint64_t interval_ms = 0;
  int max_restarts = 0;
  int max_failed_probes = 0;
  double max_error_rate = 0;
  int min_requests = 0;
  std::string front_socket;
  std::string front_server;
  friend bool operator==(const SoakStep&, const SoakStep&) = default;
};

/// kWriteFront, kRoute, kDrain, kReady: a front (HAProxy holding public `port`). `server`: the
/// backend a route sends to or a drain waits on ("hold": none); the admin and master sockets and
/// the configuration file. kWriteFront: `config_text` is written there, and `reload` when the
/// front runs. kDrain's bound and kReady's lead (how long it waits after turning 503):
/// timeout_ms. kReady: `ready` is the state the path turns to.
struct FrontStep {
  int port = 0;
  std::string server;
  std::string socket;
  std::string master;
  std::string config;
  std::string config_text;
  /// kWriteFront: the HAProxy that runs the front, which checks config_text (`haproxy -c`)
  /// before it replaces the file.
  std::string haproxy;
  bool reload = false;
  bool ready = false;
  uint64_t timeout_ms = 0;
  friend bool operator==(const FrontStep&, const FrontStep&) = default;
};

/// kPrewarm: the *.safetensors files of a snapshot folder (links followed into the blobs), or
/// the one file `file` inside it (llama-server's GGUF), read into the page cache; `bytes`: what
/// the plan expects to read (the memory it counted).
struct PrewarmStep {
  std::string snapshot;
  uint64_t bytes = 0;
  std::string file;  // a path inside the snapshot; "" = its *.safetensors
  friend bool operator==(const PrewarmStep&, const PrewarmStep&) = default;
};

/// kSleep, kWake: vLLM's sleep mode on host:port (POST /sleep?level=LEVEL or POST /wake_up,
/// then GET /is_sleeping until it says so), within timeout_ms. kSleep: the GPUs whose memory it
/// frees, checked through NVML once asleep (the unit's processes hold at most residual_bytes on
/// each), and the host memory its weights take while it sleeps (the plan's memory ledger).
struct StandbyStep {
  std::string host;
  int port = 0;
  int level = 1;
  uint64_t timeout_ms = 0;
  std::vector<int> gpus;
  uint64_t residual_bytes = 0;
  uint64_t memory_bytes = 0;
  friend bool operator==(const StandbyStep&, const StandbyStep&) = default;
};

/// What one step carries (std::monostate: kDaemonReload, which needs nothing).
using StepPayload = std::variant<std::monostate, DownloadStep, RemoveModelStep, UnitFileStep,
                                 ServiceStep, HealthStep, PreflightStep, SmokeStep, FloorStep,
                                 SoakStep, FrontStep, PrewarmStep, StandbyStep>;

/// Where `berth plan -o json` shows a payload's field (engine/output/plan_json.cc: in the
/// step's object named for its kind, "model", "health", "floor"...).
enum class Shown {
  kNo,
  kAlways,       // in the step's object
  kLimit,        // a floor's limits: in kFloor's object, not kReference's
  kGoodput,      // in the floor's "goodput" object, when it has goodput limits
  kRelative,     // in the floor's "relative" object, when it compares with a reference
  kEngineCheck,  // in a preflight's "engine_check" object, when it checks an engine
  kWriteFront,   // in kWriteFront's object only
  kNotEmpty,     // beside the step's unit, when not empty
};

/// One field of payload T: the one list of a payload's fields that a saved plan writes and
/// reads (its "step" object, under `key`), that a saved plan refused for a changed field names
/// (`words`, else the key), and that `berth plan -o json` shows (where, under `shown_as`, else
/// the key). A field shown twice has a second entry without a key (not saved again).
template <class T, class M>
struct StepField {
  const char* key;
  M T::*member;
  const char* words = nullptr;
  Shown shown = Shown::kNo;
  const char* shown_as = nullptr;
};

/// The fields of each payload, in the order a saved plan and the JSON plan write them.
template <class T>
inline constexpr auto kStepFields = std::tuple<>{};
template <>
inline constexpr auto kStepFields<DownloadStep> =
    std::tuple{StepField{"repo_id", &DownloadStep::repo_id, "repo", Shown::kAlways},
               StepField{"revision", &DownloadStep::revision, nullptr, Shown::kAlways},
               StepField{"commit", &DownloadStep::commit, "model commit", Shown::kAlways},
               StepField{"include", &DownloadStep::include, nullptr, Shown::kAlways},
               StepField{"exclude", &DownloadStep::exclude, nullptr, Shown::kAlways}};
template <>
inline constexpr auto kStepFields<RemoveModelStep> =
    std::tuple{StepField{"repo_id", &RemoveModelStep::repo_id, "repo", Shown::kAlways},
               StepField{"commit", &RemoveModelStep::commit, "model commit", Shown::kAlways}};
// (Its old text is for the reviewer's diff only, and not saved.)
template <>
inline constexpr auto kStepFields<UnitFileStep> = std::tuple{
    StepField{"content", &UnitFileStep::content, "unit content"},
    StepField{"replaces", &UnitFileStep::replaces}, StepField{"adopts", &UnitFileStep::adopts},
    StepField{"loses_edits", &UnitFileStep::loses_edits}};
template <>
inline constexpr auto kStepFields<ServiceStep> =
    std::tuple{StepField{"for_service", &ServiceStep::for_service, "service it makes room for",
                         Shown::kNotEmpty},
               StepField{"gpus", &ServiceStep::gpus, "GPUs", Shown::kNotEmpty}};
template <>
inline constexpr auto kStepFields<HealthStep> =
    std::tuple{StepField{"host", &HealthStep::host, "address probed"},
               StepField{"port", &HealthStep::port, nullptr, Shown::kAlways},
               StepField{"path", &HealthStep::path, "health path", Shown::kAlways},
               StepField{"served_name", &HealthStep::served_name, "served name", Shown::kAlways,
                         "served_model_name"},
               StepField{"timeout_ms", &HealthStep::timeout_ms, "timeout", Shown::kAlways},
               StepField{"interval_ms", &HealthStep::interval_ms, "interval"}};
template <>
inline constexpr auto kStepFields<PreflightStep> = std::tuple{
    StepField{"argv", &PreflightStep::argv, "command", Shown::kAlways, "command"},
    StepField{"timeout_ms", &PreflightStep::timeout_ms, "timeout", Shown::kAlways},
    StepField{"engine", &PreflightStep::engine, "engine checked", Shown::kEngineCheck},
    StepField{"check_program", &PreflightStep::check_program, "check program", Shown::kEngineCheck},
    StepField{nullptr, &PreflightStep::argv, nullptr, Shown::kEngineCheck, "argv"},
    StepField{"env", &PreflightStep::env, "environment", Shown::kEngineCheck, "environment"},
    StepField{"env_file", &PreflightStep::env_file, "environment file", Shown::kEngineCheck,
              "environment_file"}};
template <>
inline constexpr auto kStepFields<SmokeStep> =
    std::tuple{StepField{"host", &SmokeStep::host, "address probed"},
               StepField{"port", &SmokeStep::port, nullptr, Shown::kAlways},
               StepField{"api", &SmokeStep::api, "API", Shown::kAlways},
               StepField{"served_name", &SmokeStep::served_name, "served name", Shown::kAlways,
                         "served_model_name"},
               StepField{"prompt", &SmokeStep::prompt, nullptr, Shown::kAlways},
               StepField{"max_tokens", &SmokeStep::max_tokens, "max tokens", Shown::kAlways},
               StepField{"timeout_ms", &SmokeStep::timeout_ms, "timeout", Shown::kAlways}};
template <>
inline constexpr auto kStepFields<FloorStep> = std::tuple{
    StepField{"host", &FloorStep::host, "address probed"},
    StepField{"port", &FloorStep::port, nullptr, Shown::kAlways},
    StepField{"served_name", &FloorStep::served_name, "served name", Shown::kAlways,
              "served_model_name"},
    StepField{"concurrency", &FloorStep::concurrency, nullptr, Shown::kAlways},
    StepField{"duration_ms", &FloorStep::duration_ms, "duration", Shown::kAlways},
    StepField{"max_tokens", &FloorStep::max_tokens, "max tokens", Shown::kAlways},
    StepField{"prompt_tokens", &FloorStep::prompt_tokens, "prompt tokens", Shown::kAlways},
    StepField{"min_output_tps", &FloorStep::min_output_tps, "minimum output tok/s", Shown::kLimit,
              "min_output_tokens_per_second"},
    StepField{"max_ttft_p50_ms", &FloorStep::max_ttft_p50_ms, "TTFT p50 limit", Shown::kLimit},
    StepField{"max_ttft_p99_ms", &FloorStep::max_ttft_p99_ms, "TTFT p99 limit", Shown::kLimit},
    StepField{"goodput_ttft_ms", &FloorStep::goodput_ttft_ms, "goodput's TTFT limit",
              Shown::kGoodput, "ttft_ms"},
    StepField{"goodput_tpot_ms", &FloorStep::goodput_tpot_ms, "goodput's TPOT limit",
              Shown::kGoodput, "tpot_ms"},
    StepField{"goodput_e2el_ms", &FloorStep::goodput_e2el_ms, "goodput's E2E latency limit",
              Shown::kGoodput, "e2el_ms"},
    StepField{"min_goodput_rps", &FloorStep::min_goodput_rps, "minimum goodput", Shown::kGoodput,
              "min_rps"},
    StepField{"reference_unit", &FloorStep::reference_unit, "floor's reference", Shown::kRelative},
    StepField{"rel_output_tps", &FloorStep::rel_output_tps, "relative output tok/s limit",
              Shown::kRelative, "output_tps"},
    StepField{"rel_ttft_p50", &FloorStep::rel_ttft_p50, "relative TTFT p50 limit", Shown::kRelative,
              "ttft_p50"},
    StepField{"rel_ttft_p99", &FloorStep::rel_ttft_p99, "relative TTFT p99 limit", Shown::kRelative,
              "ttft_p99"},
    StepField{"rel_tpot_p50", &FloorStep::rel_tpot_p50, "relative TPOT p50 limit", Shown::kRelative,
              "tpot_p50"},
    StepField{"rel_goodput", &FloorStep::rel_goodput, "relative goodput limit", Shown::kRelative,
              "goodput"},
    StepField{"refuse_without_reference", &FloorStep::refuse_without_reference,
              "floor's without_reference", Shown::kRelative},
    // The figures recorded earlier that the floor compares with when the reference is not
    // measured before the switch (the JSON plan: null when none).
    StepField{"recorded", &FloorStep::recorded, "floor's recorded reference", Shown::kRelative},
    StepField{"commit", &FloorStep::commit, "model commit"},
    StepField{"settings", &FloorStep::settings, "settings measured"}};
template <>
inline constexpr auto kStepFields<SoakStep> = std::tuple{
    StepField{"host", &SoakStep::host, "address probed"},
    StepField{"port", &SoakStep::port, nullptr, Shown::kAlways},
    StepField{"path", &SoakStep::path, "health path", Shown::kAlways},
    StepField{"served_name", &SoakStep::served_name, "served name"},
    StepField{"duration_ms", &SoakStep::duration_ms, "duration", Shown::kAlways},
    StepField{"interval_ms", &SoakStep::interval_ms, "interval", Shown::kAlways},
    StepField{"max_restarts", &SoakStep::max_restarts, nullptr, Shown::kAlways},
    StepField{"max_failed_probes", &SoakStep::max_failed_probes, nullptr, Shown::kAlways},
    StepField{"max_error_rate", &SoakStep::max_error_rate, nullptr, Shown::kAlways},
    StepField{"min_requests", &SoakStep::min_requests, nullptr, Shown::kAlways},
    StepField{"front_socket", &SoakStep::front_socket, nullptr, Shown::kAlways},
    StepField{"front_server", &SoakStep::front_server}};
template <>
inline constexpr auto kStepFields<FrontStep> = std::tuple{
    StepField{"port", &FrontStep::port, nullptr, Shown::kAlways},
    StepField{"server", &FrontStep::server, "front's server", Shown::kAlways},
    StepField{"socket", &FrontStep::socket, "front's admin socket", Shown::kAlways, "admin_socket"},
    StepField{"master", &FrontStep::master, "front's master socket", Shown::kAlways,
              "master_socket"},
    StepField{"config", &FrontStep::config, "front's configuration file", Shown::kAlways},
    StepField{"reload", &FrontStep::reload, "front reload", Shown::kAlways},
    StepField{"ready", &FrontStep::ready, "front ready", Shown::kAlways},
    StepField{"timeout_ms", &FrontStep::timeout_ms, "timeout", Shown::kAlways},
    StepField{"config_text", &FrontStep::config_text, "front's configuration", Shown::kWriteFront,
              "content"},
    StepField{"haproxy", &FrontStep::haproxy, "HAProxy that checks the front's configuration"}};
template <>
inline constexpr auto kStepFields<PrewarmStep> = std::tuple{
    StepField{"snapshot", &PrewarmStep::snapshot, "snapshot it reads ahead", Shown::kAlways},
    StepField{"bytes", &PrewarmStep::bytes, "bytes it reads ahead", Shown::kAlways},
    StepField{"file", &PrewarmStep::file, nullptr, Shown::kAlways}};
template <>
inline constexpr auto kStepFields<StandbyStep> =
    std::tuple{StepField{"host", &StandbyStep::host, "address probed", Shown::kAlways},
               StepField{"port", &StandbyStep::port, nullptr, Shown::kAlways},
               StepField{"level", &StandbyStep::level, "sleep level", Shown::kAlways},
               StepField{"timeout_ms", &StandbyStep::timeout_ms, "timeout", Shown::kAlways},
               StepField{"gpus", &StandbyStep::gpus, "GPUs", Shown::kAlways},
               StepField{"residual_bytes", &StandbyStep::residual_bytes,
                         "GPU memory it may keep asleep", Shown::kAlways},
               StepField{"memory_bytes", &StandbyStep::memory_bytes,
                         "host memory its weights keep asleep", Shown::kAlways}};

/// Calls f(field, payload.*field.member) for each field of the payload (a const one or not),
/// in order; nothing for std::monostate.
template <class P, class F>
void ForEachStepField(P& payload, F&& f) {
  std::apply([&](const auto&... field) { (f(field, payload.*(field.member)), ...); },
             kStepFields<std::remove_const_t<P>>);
}

}  // namespace berth
