// The payload of each kind of step: what the executor needs to carry it out, and nothing else.
// An Action holds exactly one of these (Action::step), chosen by its kind (PayloadFits); the
// planner fills it, a saved plan carries it, the executor's runner for that kind reads it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
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

/// A payload kept on the heap, with the value's copy and comparison: the gates' payloads are
/// several times the size of the others, and an Action is as big as its biggest payload (a plan
/// of 10,000 services holds 40,000 actions, few of them gates).
template <class T>
class Boxed {
 public:
  Boxed() : p_(std::make_unique<T>()) {}
  Boxed(T value) : p_(std::make_unique<T>(std::move(value))) {}  // NOLINT: implicit by design
  Boxed(const Boxed& o) : p_(o.p_ ? std::make_unique<T>(*o.p_) : nullptr) {}
  Boxed(Boxed&& o) noexcept = default;
  Boxed& operator=(const Boxed& o) {
    if (this != &o) p_ = o.p_ ? std::make_unique<T>(*o.p_) : nullptr;
    return *this;
  }
  Boxed& operator=(Boxed&& o) noexcept = default;

  // A moved-from box is empty: it may be copied, compared, assigned to or dropped, not read.
  T& operator*() { return *p_; }
  const T& operator*() const { return *p_; }
  T* operator->() { return p_.get(); }
  const T* operator->() const { return p_.get(); }
  friend bool operator==(const Boxed& a, const Boxed& b) {
    return a.p_ && b.p_ ? *a.p_ == *b.p_ : a.p_ == b.p_;
  }

 private:
  std::unique_ptr<T> p_;
};

/// What one step carries (std::monostate: kDaemonReload, which needs nothing). The big ones
/// are boxed (Action::As reads through the box).
using StepPayload =
    std::variant<std::monostate, DownloadStep, RemoveModelStep, UnitFileStep, ServiceStep,
                 HealthStep, Boxed<PreflightStep>, Boxed<SmokeStep>, Boxed<FloorStep>,
                 Boxed<SoakStep>, Boxed<FrontStep>, PrewarmStep, StandbyStep>;

/// The type of the variant's alternative that holds a T: Boxed<T> for the boxed payloads, else T.
template <class T>
struct StepSlot {
  using type =
      std::conditional_t<std::is_same_v<T, PreflightStep> || std::is_same_v<T, SmokeStep> ||
                             std::is_same_v<T, FloorStep> || std::is_same_v<T, SoakStep> ||
                             std::is_same_v<T, FrontStep>,
                         Boxed<T>, T>;
};

/// The T in `slot` (a T, or the T in a Boxed<T>).
template <class T>
T& Unbox(T& slot) {
  return slot;
}
template <class T>
const T& Unbox(const T& slot) {
  return slot;
}
template <class T>
T& Unbox(Boxed<T>& slot) {
  return *slot;
}
template <class T>
const T& Unbox(const Boxed<T>& slot) {
  return *slot;
}

}  // namespace berth
