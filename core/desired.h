// Desired: what the manifests ask for, after loading and validation.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace berth {

/// Where something was written, for diagnostics ("berth.yaml:12:5").
struct SourceLoc {
  std::string file;
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based
  std::string ToString() const;
  friend bool operator==(const SourceLoc&, const SourceLoc&) = default;
};

/// GPUs as the manifest states them, for planning where they cannot be observed (a CI job with a
/// saved observation that lacks them, a host whose driver is down).
struct GpuInventory {
  int count = 0;
  uint64_t memory_bytes = 0;  // per GPU
};

struct HostSpec {
  std::map<std::string, std::string> match;  // e.g. {"hostname": "gpu-*"}; empty matches every host
  std::string store;           // HF cache dir; "" = HF_HUB_CACHE / ~/.cache/huggingface/hub
  uint64_t reserve_bytes = 0;  // free space the plan must never consume
  std::string unit_dir = "/etc/systemd/system";
  std::optional<GpuInventory> gpus;  // host.gpus: {count, memory}
  /// Revisions of a model berth deployed before its current one that stay in the store for a
  /// rollback (host.keep_revisions, default 1); older ones berth downloaded are pruned.
  int keep_revisions = 1;
  /// host.front_dir: where each front's HAProxy configuration and sockets live
  /// (<front_dir>/<port>.cfg, <port>.sock, <port>.master, <port>.hold).
  std::string front_dir = "/var/lib/berth/fronts";
  /// host.prewarm: a switch that takes its service down first reads the new weights into the
  /// page cache before it goes dark, when they fit in memory (docs/operating.md "Prewarm");
  /// false: never.
  bool prewarm = true;
  SourceLoc loc;
};

/// `fronts: {PORT: {...}}`: berth holds the public port with HAProxy (a unit berth writes, one
/// per port, `berth-front-PORT`), and the services on that port listen on loopback backend
/// ports, so that a switch routes traffic from the old server to the new one instead of closing
/// the port (docs/operating.md "Fronts").
struct FrontDecl {
  int port = 0;                  // the public port
  std::string bind = "0.0.0.0";  // the address the front listens on
  /// How long a request waits while no backend serves (a stop-first switch, a restart): past
  /// it, 503 with Retry-After. Rounded up to whole hold rounds (1 s), at least one.
  uint64_t hold_ms = 10ULL * 60 * 1000;
  /// How long the old backend's in-flight requests (streams too) may take to finish after the
  /// front stops sending it new ones, before it is stopped anyway.
  uint64_t drain_ms = 2ULL * 60 * 1000;
  uint64_t retry_after_ms = 30ULL * 1000;  // the Retry-After of a 503 past the hold
  /// `ready: {path, lead}`: a path the front answers 200 on, 503 from `lead` before this host's
  /// first disruptive step until the switch is done, for an outside load balancer. "": none.
  std::string ready_path;
  uint64_t ready_lead_ms = 0;
  /// `route: model`: the front serves every running service on its port at once, each request
  /// routed by its JSON body's `model` to the service of that served name (ServedName), and
  /// answers GET /v1/models with them all (docs/operating.md "One port, several models").
  /// false: one service at a time, which berth switches.
  bool route_by_model = false;
  SourceLoc loc;
};

/// The name of the service (and unit, without ".service") of the front of `port`.
std::string FrontServiceName(int port);  // "berth-front-8000"
constexpr std::string_view kFrontServicePrefix = "berth-front-";
/// The path every front answers 200 on while it runs (HAProxy's monitor-uri): its health gate.
constexpr std::string_view kFrontMonitorPath = "/berth/front";

/// One wave of a fleet rollout: the hosts (globs on the host name) that go in it.
struct FleetWave {
  std::string name;
  std::vector<std::string> hosts;
  SourceLoc loc;
};

/// `fleet:`: this host is one of many that share the manifest, coordinated through etcd so that
/// at most `max_unavailable` hosts are in a dark window at once, wave after wave.
struct FleetSpec {
  std::string name;                          // "" = no fleet: the host acts alone
  std::vector<std::string> endpoints;        // http://, https://, unix:///path
  std::string ca_file, cert_file, key_file;  // TLS (absolute paths)
  std::string username, password_file;       // etcd auth; the password is read from the file
  std::string prefix = "/berth/fleets/";     // keys live under <prefix><name>/
  int max_unavailable = 1;
  uint64_t lease_ttl_ms = 30000;         // the slot's lease: a dead host's slot frees after it
  uint64_t wait_ms = 30ULL * 60 * 1000;  // how long a pass waits for its turn before failing
  uint64_t request_timeout_ms = 5000;    // each etcd request
  std::vector<FleetWave> waves;          // empty: one wave of every host
  SourceLoc loc;
  bool enabled() const { return !name.empty(); }
};

struct ModelSpec {
  std::string name;               // manifest key, e.g. "minimax-m25"
  std::string repo_id;            // "MiniMaxAI/MiniMax-M2.5" (from source hf://...)
  std::string revision = "main";  // branch, tag or 40-hex commit
  std::vector<std::string> include;
  std::vector<std::string> exclude;
  bool keep = true;                   // stays on disk while no service uses it
  std::optional<uint64_t> size_hint;  // `size:` for offline planning
  SourceLoc loc;
};

enum class EngineKind { kVllm, kSglang, kLlamaServer, kTrtllm, kCommand };
enum class ServiceState { kRunning, kStopped, kAbsent };
enum class Strategy { kAuto, kStopFirst, kStartFirst };
/// `standby:` what becomes of a running service the plan takes down (its state turns stopped,
/// or a start needs its GPUs): `stop` (default), or `sleep`: vLLM's sleep mode (level 1: the
/// weights moved to host RAM, the GPU memory freed, the process and its port kept), when host
/// memory holds its weights; waking it takes seconds where a cold start takes minutes.
enum class Standby { kStop, kSleep };

const char* EngineName(EngineKind e);
const char* ServiceStateName(ServiceState s);
const char* StrategyName(Strategy s);
const char* StandbyName(Standby s);  // "stop", "sleep"

/// `vllm.speculative:`, rendered as --speculative-config JSON (vllm/config/speculative.py's
/// SpeculativeConfig fields of the same names).
struct VllmSpeculative {
  std::string method;              // one of the catalogue's speculative_methods: "mtp", "eagle3"
  int num_speculative_tokens = 0;  // > 0 (required)
  /// A key of Desired::models: the draft model (eagle head, ...), rendered as its snapshot
  /// path and downloaded like the service's model; "" for methods that draw from the target
  /// (mtp) or the prompt (ngram).
  std::string model;
  std::optional<int> draft_tensor_parallel_size;
  std::optional<int> prompt_lookup_min;  // ngram
  std::optional<int> prompt_lookup_max;  // ngram
};

struct VllmOptions {
  int tensor_parallel_size = 1;
  int pipeline_parallel_size = 1;
  /// Replicas of the model, each on tensor_parallel_size × pipeline_parallel_size GPUs.
  int data_parallel_size = 1;
  bool enable_expert_parallel = false;
  double gpu_memory_utilization = 0.9;  // vLLM's default
  std::optional<uint64_t> max_model_len;
  /// --max-num-seqs: sequences in one batch at most; unset = vLLM's default (by GPU and usage).
  std::optional<int> max_num_seqs;
  std::string served_model_name;  // "" = the service name
  bool trust_remote_code = false;
  std::string tool_call_parser;  // "" = none (no auto tool choice)
  std::string reasoning_parser;  // "" = none
  std::string kv_cache_dtype;    // "" = vLLM's default ("auto": the model's dtype)
  std::optional<VllmSpeculative> speculative;
};

/// SGLang's speculative decoding (--speculative-*, python/sglang/srt/server_args.py).
struct SglangSpeculative {
  std::string algorithm;  // "" = none; EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM (SGLang's case)
  std::optional<int> num_steps;
  std::optional<int> eagle_topk;
  std::optional<int> num_draft_tokens;
  std::string draft_model;  // a key of `models:`, rendered as its snapshot path; "" = none
};

struct SglangOptions {
  int tp_size = 1;
  int dp_size = 1;  // replicas (or, with enable_dp_attention, attention groups within tp)
  int ep_size = 1;  // expert parallel size, within tp
  bool enable_dp_attention = false;
  double mem_fraction_static = 0.88;
  std::optional<uint64_t> context_length;
  std::string served_model_name;
  bool trust_remote_code = false;
  std::string tool_call_parser;  // "" = none: tool calls come back as text
  std::string reasoning_parser;
  std::string kv_cache_dtype;  // "" = SGLang's default (auto)
  SglangSpeculative speculative;
};

struct LlamaServerOptions {
  /// -ngl: a number of layers, "auto" (llama.cpp fits what free memory allows) or "all".
  std::string n_gpu_layers = "all";
  std::optional<uint64_t> ctx_size;
  std::string model_file;  // a .gguf path inside the snapshot (required)
  std::string alias;
  bool jinja = false;
  std::optional<int> parallel;  // --parallel: server slots; unset = llama.cpp's auto
  std::string cache_type_k;     // "" = llama.cpp's default (f16)
  std::string cache_type_v;
  std::string split_mode;  // "" = llama.cpp's default (layer)
  /// --threads: CPU threads of generation; unset = llama.cpp's (the physical cores).
  std::optional<int> threads;
  /// --batch-size / --ubatch-size: the logical and physical batch in tokens; unset =
  /// llama.cpp's 2048 and 512. llama.cpp uses min(batch_size, ubatch_size) as the physical batch.
  std::optional<int> batch_size;
  std::optional<int> ubatch_size;
};

/// TensorRT-LLM's `trtllm-serve serve` (tensorrt_llm/commands/serve.py).
struct TrtllmOptions {
  int tp_size = 1;
  int pp_size = 1;
  std::optional<int> ep_size;  // --ep_size (MoE expert parallel, within tp); unset = its default
  std::string backend;         // "" = trtllm-serve's default (pytorch)
  bool trust_remote_code = false;
  std::optional<uint64_t> max_seq_len;
  std::string extra_llm_api_options;  // absolute path of the operator's YAML; "" = none
};

struct HealthSpec {
  std::string path = "/health";
  uint64_t timeout_ms = 30 * 60 * 1000;  // vLLM loading 200+ GB can take long
  uint64_t interval_ms = 5000;
};

/// `preflight:` the service's own check (an engine's architecture check, say), run at apply
/// time without a shell after the downloads and before anything goes dark; it must exit 0.
/// `engine:` (on by default, also without a preflight: block) adds the engine check: the
/// engine's own argument parser and configuration for the unit's argv and environment.
struct PreflightSpec {
  std::vector<std::string> command;     // argv; the first is an absolute path; empty: none
  uint64_t timeout_ms = 5 * 60 * 1000;  // killed past it (and the apply fails); both checks
  bool engine_check = true;             // `engine: on` (default) or `engine: off`
};

/// `gates: {smoke: ...}`: one request after the health gate must return non-empty text.
struct SmokeSpec {
  std::string api = "completions";  // "completions" (/v1/completions) or "chat" (/v1/chat/...)
  std::string prompt = "Say hello.";
  int max_tokens = 16;
  uint64_t timeout_ms = 60 * 1000;  // for the whole request
};

/// `gates: {floor: ...}`: a throughput floor measured for a bounded time after the health gate
/// (and the smoke gate): `concurrency` streamed requests kept in flight for `duration_ms`; the
/// output tokens per second must reach `output_tps` and the time to first token stay under
/// `ttft_p50_ms` / `ttft_p99_ms` (0: not checked). `relative:` compares the same figures (and
/// TPOT p50) with those of the service the switch replaces, measured on it with the same load
/// just before it goes down: output tok/s at least `rel_output_tps` times the reference's, the
/// latencies at most their ratio times the reference's (0: not checked). At least one limit,
/// absolute or relative, is set.
struct FloorSpec {
  int concurrency = 1;
  uint64_t duration_ms = 20 * 1000;
  double output_tps = 0;
  uint64_t ttft_p50_ms = 0;
  uint64_t ttft_p99_ms = 0;
  int max_tokens = 256;
  int prompt_tokens = 128;
  double rel_output_tps = 0;
  double rel_ttft_p50 = 0;
  double rel_ttft_p99 = 0;
  double rel_tpot_p50 = 0;
  double rel_goodput = 0;
  /// `goodput: {ttft, tpot, e2el, min_rps}`: a finished request is good when it meets every
  /// limit given (vllm bench serve's --goodput); at least `min_goodput_rps` good requests per
  /// second (0: unchecked), and `relative: {goodput: R}` compares with the reference's.
  uint64_t goodput_ttft_ms = 0, goodput_tpot_ms = 0, goodput_e2el_ms = 0;
  double min_goodput_rps = 0;
  /// `without_reference: refuse`: with no reference to compare with, the plan is blocked (and a
  /// gate whose reference could not be measured fails); `absolute` (default): the absolute
  /// limits alone apply.
  bool refuse_without_reference = false;
  bool relative() const {
    return rel_output_tps > 0 || rel_ttft_p50 > 0 || rel_ttft_p99 > 0 || rel_tpot_p50 > 0 ||
           rel_goodput > 0;
  }
  bool has_goodput() const { return goodput_ttft_ms || goodput_tpot_ms || goodput_e2el_ms; }
};

/// `gates: {soak: ...}`: the last gate. For `duration_ms` after the other gates passed, berth
/// watches the new service: systemd must restart it at most `max_restarts` times, its health
/// path must answer (at most `max_failed_probes` probes in a row may fail, one every
/// `interval_ms`), and behind a front, at most `max_error_rate` of the requests the front sent it
/// may be answered 5xx (counted once at least `min_requests` were). A failure rolls the switch
/// back like any gate, and holds the change.
struct SoakSpec {
  uint64_t duration_ms = 5 * 60 * 1000;
  int max_restarts = 0;
  uint64_t interval_ms = 5 * 1000;
  int max_failed_probes = 3;
  double max_error_rate = 0.05;
  int min_requests = 20;
};

/// The gates a start must pass after its health gate, in this order. Each failed gate fails
/// the switch like a failed health gate: rollback, exit 4, the change held.
struct GatesSpec {
  std::optional<SmokeSpec> smoke;
  std::optional<FloorSpec> floor;
  std::optional<SoakSpec> soak;
  bool empty() const { return !smoke && !floor && !soak; }
};

/// `on_demand: true`: the service's port is held by a systemd socket unit; the first connection
/// starts the model server, which stops after `idle_stop_ms` without connections
/// (docs/operating.md "On-demand services"). The units berth renders for it:
/// OnDemandSocketName / OnDemandProxyName (the socket and the proxy it activates) and the
/// service's own unit (the model server, listening on 127.0.0.1 and ServiceSpec::port).
struct OnDemandSpec {
  /// The port the socket holds: the manifest's `port:`, or behind a routed front the service's
  /// loopback backend port; and where it listens (the manifest's `bind:`, or 127.0.0.1).
  int public_port = 0;
  std::string bind = "0.0.0.0";
  uint64_t idle_stop_ms = 10ULL * 60 * 1000;  // `idle_stop:` (systemd-socket-proxyd's idle exit)
  /// `swap_group:` services of one group take turns (at most one runs): their units conflict.
  std::string swap_group;
};

/// The units of on-demand service `service`: "berth-wake-chat.socket", "berth-wake-chat.service".
std::string OnDemandSocketName(const std::string& service);
std::string OnDemandProxyName(const std::string& service);
constexpr std::string_view kOnDemandPrefix = "berth-wake-";

struct ServiceSpec {
  std::string name;  // unit is name + ".service"
  ServiceState state = ServiceState::kRunning;
  /// False for a state-only entry ("vllm-kimi-k25: {state: stopped}"): berth only starts or
  /// stops a unit that exists, and never writes its file.
  bool has_engine = false;
  EngineKind engine = EngineKind::kVllm;
  std::string model;  // a key of Desired::models; "" for engine command without model
  std::vector<int> gpus;
  /// Where the server listens. Behind a front (front_port or routed_port set), the loopback
  /// backend port the loader assigned (backend_port:, or derived from the name); bind is then
  /// 127.0.0.1.
  std::optional<int> port;
  std::string bind = "0.0.0.0";
  /// The public port when the service is behind a front (`fronts:` names its `port:`); 0: none.
  int front_port = 0;
  /// The public port when the service is behind a front that routes by model (`route: model`):
  /// it serves there beside the port's other services, never switched with them; front_port
  /// is then 0. 0: none.
  int routed_port = 0;
  /// The front of this port itself (a service berth adds for each `fronts:` entry).
  bool is_front = false;
  std::string executable;  // "" = engine default (host.executables or the engine's name)
  // Each engine's own options (those of the other engines stay at their defaults).
  VllmOptions vllm;
  SglangOptions sglang;
  LlamaServerOptions llama;
  TrtllmOptions trtllm;
  std::vector<std::string> command;  // engine: command
  /// engine: command's `served_name:`: the model id its server lists in /v1/models; "" = berth
  /// cannot know it, and the health gate checks the health path alone.
  std::string served_name;
  /// The model a speculative decoder drafts with (a key of `models:`), whatever engine's
  /// section names it: downloaded and kept like `model`. "" = none.
  std::string draft_model;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::string env_file;
  /// Per-GPU memory claim for engines whose claim berth cannot derive (command), or that it
  /// derives only as well as it can (llama-server: from its GGUF file, planners/llama_claim.h).
  std::optional<uint64_t> gpu_memory;
  HealthSpec health;
  /// How long systemd waits for the server to exit after SIGTERM before it kills it
  /// (TimeoutStopSec=): the most an old server's stop adds to a stop-first switch's dark window.
  uint64_t stop_timeout_ms = kDefaultStopTimeoutMs;
  static constexpr uint64_t kDefaultStopTimeoutMs = 2 * 60 * 1000;
  /// berth waits 5 minutes for a systemd job; a stop timeout stays well inside it.
  static constexpr uint64_t kMaxStopTimeoutMs = 4 * 60 * 1000;
  std::optional<PreflightSpec> preflight;
  GatesSpec gates;
  Strategy strategy = Strategy::kAuto;
  Standby standby = Standby::kStop;
  /// `on_demand: true`; `port` is then the model server's own loopback port (`server_port:`, or
  /// derived from the name in 20000-29999) and `bind` 127.0.0.1. Behind a routed front the
  /// socket holds the service's loopback backend port (OnDemandSpec::public_port).
  std::optional<OnDemandSpec> on_demand;
  bool adopt = false;
  SourceLoc loc;

  std::string UnitName() const { return name + ".service"; }
  /// Every unit berth writes for the service: UnitName(), and for an on-demand service its
  /// socket and proxy units.
  std::vector<std::string> UnitNames() const;
  /// The port clients dial: the front's behind a front (routed or not), the socket's for an
  /// on-demand service, else `port` (0: none).
  int PublicPort() const;
  /// The name the manifest gives the served model: the engine section's served_model_name or
  /// alias, engine: command's served_name, else the service's name. What the server itself
  /// lists in /v1/models is its adapter's ReportedName (trtllm-serve lists its model folder's
  /// name, which the manifest cannot set).
  /// Every model the service needs on disk: `model`, then its speculative draft model
  /// (`draft_model`), each once; empty keys left out.
  std::vector<std::string> ModelKeys() const;
  std::string ServedName() const;
  /// Where berth's probes (health, smoke, floor, berth status, berth bench) reach it:
  /// DialAddress(bind).
  std::string DialHost() const;
};

/// The address to dial for a server bound to `bind`: 127.0.0.1 for an unspecified IPv4
/// address (0.0.0.0) or "", ::1 for an unspecified IPv6 one (::), the address itself otherwise
/// (brackets around an IPv6 literal dropped: URLs add them). The one place this is decided.
std::string DialAddress(const std::string& bind);

/// One entry of berth.lock: the commit a model's (non-commit) revision was resolved to when it
/// was locked. The lock sits beside the manifests and is trusted like them.
struct LockEntry {
  std::string repo_id;    // "MiniMaxAI/MiniMax-M2.5"
  std::string revision;   // as the manifest asked when locked: "main"
  std::string commit;     // 40 hex
  std::string locked_at;  // RFC 3339, informative
};

struct Desired {
  int version = 1;
  HostSpec host;
  FleetSpec fleet;
  std::map<std::string, std::string> executables;  // engine name -> path (host level)
  std::map<std::string, ModelSpec> models;
  std::map<std::string, ServiceSpec> services;  // fronts' own services included
  std::map<int, FrontDecl> fronts;              // by public port
  std::string digest;  // sha256 of the manifest files' bytes, in path order, then berth.lock's
  std::vector<std::string> files;
  /// berth.lock's entries by model name (empty when there is no lock file).
  std::map<std::string, LockEntry> locks;
  std::string lock_path;  // where berth.lock is or would be; "" for in-memory manifests

  /// The lock entry that pins `m`: its revision is not a commit and berth.lock has an entry of
  /// the same repo and revision. Null when unpinned or when the entry is stale.
  const LockEntry* PinFor(const ModelSpec& m) const;
};

}  // namespace berth
