// Observed: the host as the providers saw it at one moment. Also the JSON form read by
// `berth plan --observed FILE` (see docs in observed_json.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/gate_figures.h"
#include "core/gguf_header.h"
#include "core/model_config.h"

namespace berth {

/// One snapshot of a repo in the store (snapshots/<commit>).
struct ObservedRevision {
  std::string commit;                   // 40 hex
  std::vector<std::string> refs;        // refs/<name> files pointing at it, e.g. {"main"}
  bool complete = false;                // every file of the snapshot present and verified
  uint64_t bytes_present = 0;           // blobs present, including .incomplete partials
  std::optional<uint64_t> bytes_total;  // when known (from a verified record or the hub)
  /// The snapshot's config.json (read by the store scan, at most kMaxModelConfigBytes): its
  /// architectures, or why berth cannot use it. Unset: not looked at (no snapshot yet, or an
  /// observation saved before berth read it).
  std::optional<ModelConfig> config;
  /// Bytes of the snapshot's *.safetensors files present; unset when it has none.
  std::optional<uint64_t> weights_bytes;
  /// The header of each *.gguf file of a complete snapshot (path in the snapshot -> what its
  /// first bytes say, at most kMaxGgufHeaderBytes read). Unset: not looked at.
  std::optional<std::map<std::string, GgufHeader>> gguf;
  /// Bytes of the snapshot's *.safetensors files the page cache holds (mincore); unset: not
  /// looked at (berth looks at the revisions the manifest's services run).
  std::optional<uint64_t> resident_bytes;
};

struct ObservedRepo {
  std::string repo_id;  // "org/name"
  std::vector<ObservedRevision> revisions;
};

struct ObservedStore {
  std::string path;
  bool exists = true;
  uint64_t total_bytes = 0;  // of the filesystem holding the store
  uint64_t free_bytes = 0;   // available to berth (statvfs f_bavail)
  std::vector<ObservedRepo> repos;
};

struct GpuProcess {
  int pid = 0;
  uint64_t used_bytes = 0;
  std::string unit;  // owning systemd unit ("vllm-kimi-k25.service"), "" if none
  std::string name;  // process name, for messages
};

struct ObservedGpu {
  int index = 0;
  std::string uuid;
  std::string name;
  uint64_t memory_total = 0;
  uint64_t memory_used = 0;
  std::vector<GpuProcess> processes;
};

/// The largest unit file not written by berth whose text the observation keeps.
inline constexpr uint64_t kMaxForeignUnitBytes = 64 * 1024;

/// The largest front configuration the observation reads (berth writes a few KiB).
inline constexpr uint64_t kMaxFrontConfigBytes = 256 * 1024;

struct ObservedUnit {
  std::string name;          // "vllm-kimi-k25.service"
  std::string load_state;    // loaded | not-found | masked | error
  std::string active_state;  // active | inactive | failed | activating | deactivating | reloading
  std::string sub_state;     // running | dead | exited | ...
  std::string fragment_path;
  std::string content_hash;  // sha256 of the unit file's bytes; "" if no file
  bool managed = false;      // the file carries berth's marker (written by some berth)
  std::string lineage;       // the state lineage stamped in berth's header; "" if none
  std::string spec_hash;     // from the marker: hash of the content berth wrote
  /// The file's text: always for berth's units (change details, drift), for others up to
  /// kMaxForeignUnitBytes (the diff a reviewer is shown when berth replaces it). Untrusted:
  /// escape it before printing it on a terminal (EscapeControl).
  std::string content;
  /// Why `content` is not the file's text although the unit has a file ("larger than 64 KiB
  /// ..."); "" when it is, or when there is no file.
  std::string content_note;
  int main_pid = 0;
  bool need_daemon_reload = false;
  std::vector<std::string> drop_in_paths;  // drop-ins change a unit behind its file's back
  std::string unit_file_state;  // enabled | disabled | static | ... (as of systemd's last reload)
  std::string invocation_id;    // hex; changes on every (re)start
  uint32_t n_restarts = 0;      // automatic restarts (Restart=)
  std::string result;           // success | exit-code | signal | timeout | ...
  int exec_main_status = 0;     // exit status or signal of the main process
  uint64_t active_enter_usec = 0;  // when it last became active, unix µs (0: never, unknown)
  /// How long its last start took, ms, as systemd timed it: from leaving inactive to active
  /// (LastStartMs of InactiveExitTimestampMonotonic and ActiveEnterTimestampMonotonic). For an
  /// on-demand server, whose ExecStartPost= waits for its health, what a first request waited.
  /// That start is of invocation `invocation_id`. Unset: never started, starting now, its last
  /// start failed, or not known.
  std::optional<uint64_t> last_start_ms = std::nullopt;
  /// How long systemd waits for it to exit after its stop signal before it kills it
  /// (TimeoutStopUSec), µs: 0 unknown, kNoStopTimeout: never kills it.
  uint64_t timeout_stop_usec = 0;
  static constexpr uint64_t kNoStopTimeout = UINT64_MAX;
  /// systemd keeps restarting it, or gave up on it (IsCrashLooping, decided when observed):
  /// it does not count as up, whatever active_state says.
  bool crash_looping = false;

  bool IsActive() const {
    return active_state == "active" || active_state == "activating" || active_state == "reloading";
  }
  bool HasFile() const { return !fragment_path.empty() && !content_hash.empty(); }
  /// Active and not crash-looping: what berth counts as a service up.
  bool IsUp() const { return IsActive() && !crash_looping; }
  /// Failed after systemd gave up restarting it (Result=start-limit-hit, or failed after
  /// automatic restarts): a crash loop that systemd ended.
  bool GaveUp() const {
    return active_state == "failed" && (result == "start-limit-hit" || n_restarts > 0);
  }
};

/// The longest start berth takes systemd's timestamps for (a day): past it, they are not a
/// start's time berth can use.
inline constexpr uint64_t kMaxStartMs = 24ull * 3600 * 1000;

/// The time of a unit's last start from systemd's monotonic timestamps (µs): ActiveEnter minus
/// InactiveExit, in ms, when that start completed (active_enter >= inactive_exit > 0: a start
/// under way or failed entered no active state since) and took at most kMaxStartMs.
std::optional<uint64_t> LastStartMs(uint64_t inactive_exit_usec, uint64_t active_enter_usec);

/// How long a unit must stay active after systemd restarted it on its own before it counts as
/// up again: 10 minutes, longer than a large model takes to load and crash once more.
inline constexpr uint64_t kCrashLoopSettleUsec = 10ull * 60 * 1000 * 1000;

/// Whether systemd keeps restarting `u` (its Restart=) or gave up on it, at `now_usec` (unix µs
/// of the observation; 0: unknown). Crash-looping: waiting for its automatic restart
/// (SubState auto-restart), or, after automatic restarts since it was last started on request
/// (NRestarts > 0: systemd counts them from 0 again on a start asked for), starting again,
/// failed (GaveUp), or active for less than kCrashLoopSettleUsec (ActiveEnterTimestamp). A unit
/// with restarts that has run steadily since, or whose start time is not known, is not.
bool IsCrashLooping(const ObservedUnit& u, uint64_t now_usec);
/// Sets crash_looping on every unit of `units` (IsCrashLooping at `now_usec`).
void MarkCrashLoops(std::vector<ObservedUnit>* units, uint64_t now_usec);
/// "restarted 3 times by systemd, now activating/auto-restart" or "... systemd gave up
/// (start-limit-hit)": what an operator reads after "crash-looping: ".
std::string CrashLoopDetail(const ObservedUnit& u);

struct ListeningPort {
  int port = 0;
  std::string address;  // "0.0.0.0", "127.0.0.1", "::"
  int pid = 0;
  std::string process;
  std::string unit;  // owning unit, "" if none
};

struct HubFile {
  std::string path;
  uint64_t size = 0;
};

/// What the Hub said of one (repo, revision), when berth asked.
struct HubInfo {
  std::string repo_id;
  std::string revision;        // as asked: "main"
  std::string commit;          // what it resolved to
  std::vector<HubFile> files;  // the whole tree; the planner applies include/exclude
};

/// The last failure of an action on a resource.
struct Failure {
  std::string time;  // RFC 3339
  std::string message;
};

/// A change that failed after something went dark (a start, stop, restart or health gate of a
/// service): berth does not try the same manifest again on its own, so a failing switch costs
/// one outage, not one per retry. Cleared by a manifest change (another digest), by
/// `berth apply --retry`, or by a successful apply.
struct HeldChange {
  std::string digest;   // the manifest digest whose apply failed; "" = nothing held
  std::string time;     // RFC 3339
  std::string address;  // the action that failed ("service/vllm-minimax-m25")
  std::string message;
  bool empty() const { return digest.empty(); }
};

/// What berth saw a state-only service (one whose unit it does not write) hold while it ran:
/// once the service is stopped, the only way berth knows its port and GPUs.
struct LearnedService {
  std::vector<int> ports;             // TCP ports its processes listened on, ascending
  std::map<int, uint64_t> gpu_bytes;  // GPU index -> bytes its processes held
  bool operator==(const LearnedService&) const = default;
};

/// berth's own records (the state directory), as observed: what berth created, what failed
/// last, and where an apply that did not finish stopped.
struct BerthState {
  uint64_t serial = 0;
  std::string lineage;
  std::vector<std::string> units;                          // unit names berth wrote
  std::map<std::string, std::vector<std::string>> models;  // repo_id -> commits berth downloaded
  std::map<std::string, Failure> failures;                 // address -> the last failure
  /// An apply that stopped before it finished (killed, power lost): where, as a sentence
  /// ("an apply started <time> by pid <pid> stopped at step 3 (start service/x, running)");
  /// "" when the last apply finished.
  std::string interrupted;
  /// Services that apply started but never saw pass their health gate ("service/x").
  std::vector<std::string> ungated;
  /// unit -> [invocation id, RestartDigest (or an older berth's spec hash)]: the settings
  /// berth's last start or restart of it ran with, so a process still of that invocation whose
  /// file has changed since in a setting that needs a restart runs an older unit.
  std::map<std::string, std::pair<std::string, std::string>> started;
  HeldChange held;
  /// unit -> what a state-only service held when berth last saw it run (ports, GPU memory).
  std::map<std::string, LearnedService> learned;
  /// unit -> how long its last starts took, in milliseconds from the start or restart action
  /// beginning to its health gate passing (oldest first, at most kStartTimesKept).
  std::map<std::string, std::vector<uint64_t>> start_times_ms;
  static constexpr size_t kStartTimesKept = 5;
  /// unit -> the invocation whose start, made by a request and timed by systemd
  /// (ObservedUnit::last_start_ms), was last added to start_times_ms: each is added once.
  std::map<std::string, std::string> start_invocations;
  /// unit -> how long its last stops took, in milliseconds from the stop action beginning to
  /// systemd reporting it stopped (oldest first, at most kStartTimesKept): a server draining
  /// its requests (llama-server waits 30 s for them) keeps a stop-first switch's port dark.
  std::map<std::string, std::vector<uint64_t>> stop_times_ms;
  /// unit -> what its floor gates and floor references measured, oldest first (at most
  /// kGateFiguresKept): a relative floor's reference when that service cannot be measured.
  std::map<std::string, std::vector<GateFigures>> gate_figures;

  /// The last start of `u` that start_times_ms lack (UnrecordedStart): not berth's own start
  /// (`started`), not added already (`start_invocations`).
  std::optional<uint64_t> UnrecordedStart(const ObservedUnit& u) const;
};

/// `u`'s last start (ObservedUnit::last_start_ms) when berth's start times lack it: it names an
/// invocation, which is neither `berth_started` (the invocation berth's last start of the unit
/// made: the executor records those itself) nor `recorded` (the one last added from systemd's
/// timing). A start a request made (socket activation), which nothing else records.
std::optional<uint64_t> UnrecordedStart(const ObservedUnit& u, const std::string& berth_started,
                                        const std::string& recorded);

/// Host memory as /proc/meminfo says (the third ledger beside disk and GPU memory: what a
/// prewarm may read into the page cache).
struct ObservedMemory {
  bool known = false;  // false: not read (error says why), or a saved observation without it
  std::string error;
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;  // MemAvailable
};

struct Observed {
  static constexpr int kFormatVersion = 1;
  std::string hostname;
  std::string observed_at;  // RFC 3339, informative only
  ObservedStore store;
  bool gpus_known = true;  // false: no driver / no NVML; gpu_error says why
  std::string gpu_error;
  std::vector<ObservedGpu> gpus;
  bool units_known = true;
  std::vector<ObservedUnit> units;
  bool ports_known = true;
  std::vector<ListeningPort> ports;
  std::vector<HubInfo> hub;
  ObservedMemory memory;
  /// Each front's configuration file as berth last wrote it (<front_dir>/<port>.cfg), by
  /// public port; a port without a file is absent. Read bounded (kMaxFrontConfigBytes); berth's
  /// own file, but parsed as untrusted.
  std::map<int, std::string> front_configs;
  /// unit -> whether its server sleeps (vLLM's sleep mode: GET /is_sleeping), for the running
  /// units of the manifest's `standby: sleep` services that answered; absent: not asked, or no
  /// answer (a warning says why).
  std::map<std::string, bool> sleeping;
  BerthState state;
  /// What could not be observed and why ("model/x: the Hub refused the token ..."); the plan
  /// repeats them as warnings.
  std::vector<std::string> warnings;

  const ObservedUnit* FindUnit(const std::string& name) const;
  /// Whether `u` is this state's to change or prune: berth's marker, and either this state's
  /// lineage or (units written before lineages were stamped) listed in the state's units.
  /// A unit of another lineage (another state directory) is foreign, like a hand-written one.
  bool Owns(const ObservedUnit& u) const;
  const ObservedRepo* FindRepo(const std::string& repo_id) const;
  const HubInfo* FindHub(const std::string& repo_id, const std::string& revision) const;
  const ObservedGpu* FindGpu(int index) const;
  /// Whether `unit` answered that it sleeps.
  bool Asleep(const std::string& unit) const {
    auto it = sleeping.find(unit);
    return it != sleeping.end() && it->second;
  }
};

}  // namespace berth
