#include "engine/state/state.h"

#include "core/atomic_file.h"
#include "core/json_text.h"
#include "core/log.h"
#include "core/read_file.h"
#include "providers/etcd/base64.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <stdexcept>

namespace berth {
namespace {

using nlohmann::ordered_json;

// {"ports": [8000], "gpu_bytes": {"0": 75000000000}}: GPU indexes are object keys, as text.
ordered_json LearnedToJson(const LearnedService& l) {
  ordered_json gpus = ordered_json::object();
  for (const auto& [i, b] : l.gpu_bytes) gpus[std::to_string(i)] = b;
  return {{"ports", l.ports}, {"gpu_bytes", std::move(gpus)}};
}

LearnedService LearnedFromJson(const ordered_json& j) {
  LearnedService l;
  l.ports = j.value("ports", std::vector<int>{});
  if (j.contains("gpu_bytes"))
    for (auto it = j["gpu_bytes"].begin(); it != j["gpu_bytes"].end(); ++it) {
      // A key that is not a GPU index is damage: the caller reports the file as damaged.
      const std::string& key = it.key();
      int index = -1;
      auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
      if (ec != std::errc() || end != key.data() + key.size() || index < 0)
        throw std::invalid_argument("learned.gpu_bytes: '" + key + "' is not a GPU index");
      l.gpu_bytes[index] = it.value().get<uint64_t>();
    }
  return l;
}

// <key>.<unit>: [38000, 47000]: milliseconds, oldest first. Anything else is damage, reported
// by the caller.
std::vector<uint64_t> TimesFromJson(const std::string& key, const std::string& unit,
                                    const ordered_json& j) {
  if (!j.is_array())
    throw std::invalid_argument(key + "." + unit + ": expected an array of milliseconds");
  std::vector<uint64_t> ms;
  for (const auto& v : j) {
    if (!v.is_number_unsigned())
      throw std::invalid_argument(key + "." + unit + ": '" + DumpJson(v).substr(0, 20) +
                                  "' is not a count of milliseconds");
    ms.push_back(v.get<uint64_t>());
  }
  // A file edited by hand may hold more: the newest are the ones kept.
  if (ms.size() > BerthState::kStartTimesKept)
    ms.erase(ms.begin(), ms.end() - BerthState::kStartTimesKept);
  return ms;
}

// start_invocations.<unit>: an invocation id (systemd's InvocationID is 32 hex digits): letters
// and digits, at most 64. Anything else is damage, reported by the caller.
std::string InvocationFromJson(const std::string& unit, const ordered_json& v) {
  bool ok = v.is_string() && !v.get_ref<const std::string&>().empty() &&
            v.get_ref<const std::string&>().size() <= 64;
  if (ok)
    for (char c : v.get_ref<const std::string&>())
      ok = ok && std::isalnum(static_cast<unsigned char>(c));
  if (!ok)
    throw std::invalid_argument("start_invocations." + unit + ": '" + DumpJson(v).substr(0, 40) +
                                "' is not an invocation id");
  return v.get<std::string>();
}

// `path` of the state directory: `exists` false when there is none. A link, a FIFO, a device
// or a file over kMaxStateFileBytes there is an error that names it (it exists).
Result<std::string> ReadFile(const std::string& path, bool* exists) {
  Result<std::string> text = ReadRegularFile(path, {.max_bytes = kMaxStateFileBytes});
  *exists = text.ok() || text.status().code() != Status::Code::kNotFound;
  if (!*exists) return std::string();
  return text;
}

std::string RandomHex(int bytes) {
  std::random_device rd;
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < bytes; ++i) {
    unsigned v = rd() & 0xff;
    out += kHex[v >> 4];
    out += kHex[v & 15];
  }
  return out;
}

}  // namespace

std::string NewLineage() { return RandomHex(16); }

std::string NowRfc3339(Clock& clock) { return Rfc3339(clock.UnixNow()); }

namespace {

std::string FirstLine(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

/// The commit HEAD names in git directory `gitdir`. A linked worktree's gitdir holds its own
/// HEAD; its branches live in the main repository's, which `commondir` names.
std::string HeadCommitOf(const std::filesystem::path& gitdir) {
  std::string head = FirstLine(gitdir / "HEAD");
  if (head.rfind("ref: ", 0) != 0) return head;  // detached: the commit itself
  std::string ref = head.substr(5);
  std::filesystem::path common = gitdir;
  if (std::string c = FirstLine(gitdir / "commondir"); !c.empty())
    common = std::filesystem::path(c).is_absolute() ? std::filesystem::path(c) : gitdir / c;
  for (const auto& dir : {gitdir, common})
    if (std::string commit = FirstLine(dir / ref); !commit.empty()) return commit;
  std::ifstream packed(common / "packed-refs");  // refs packed by git gc
  std::string line;
  while (std::getline(packed, line))
    if (line.size() > 41 && line.substr(41) == ref) return line.substr(0, 40);
  return "";
}

}  // namespace

std::string GitCommitOf(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (!fs::is_directory(p, ec)) p = p.parent_path();
  for (; !p.empty(); p = p.parent_path()) {
    fs::path git = p / ".git";
    if (fs::is_directory(git, ec)) return HeadCommitOf(git);
    if (fs::is_regular_file(git, ec)) {
      // A linked worktree or a submodule: .git is a file "gitdir: PATH" (relative to its folder).
      std::string line = FirstLine(git);
      if (line.rfind("gitdir: ", 0) != 0) return "";
      fs::path gitdir = line.substr(8);
      return HeadCommitOf(gitdir.is_absolute() ? gitdir : p / gitdir);
    }
    if (p == p.root_path()) break;
  }
  return "";
}

BerthState State::ToObserved() const {
  BerthState b;
  b.serial = serial;
  b.lineage = lineage;
  b.units = units;
  b.models = models;
  b.failures = failures;
  b.started = started;
  b.held = held;
  b.learned = learned;
  b.start_times_ms = start_times_ms;
  b.start_invocations = start_invocations;
  b.stop_times_ms = stop_times_ms;
  b.gate_figures = gate_figures;
  return b;
}

namespace {
void KeepTime(std::vector<uint64_t>* times, uint64_t ms) {
  times->push_back(ms);
  if (times->size() > BerthState::kStartTimesKept)
    times->erase(times->begin(), times->end() - BerthState::kStartTimesKept);
}
}  // namespace

void State::RecordStartTime(const std::string& unit, uint64_t ms) {
  KeepTime(&start_times_ms[unit], ms);
}

bool State::RecordObservedStart(const ObservedUnit& u) {
  auto by_berth = started.find(u.name);
  auto recorded = start_invocations.find(u.name);
  std::optional<uint64_t> ms =
      UnrecordedStart(u, by_berth == started.end() ? std::string() : by_berth->second.first,
                      recorded == start_invocations.end() ? std::string() : recorded->second);
  if (!ms) return false;
  RecordStartTime(u.name, *ms);
  start_invocations[u.name] = u.invocation_id;
  return true;
}

void State::RecordStopTime(const std::string& unit, uint64_t ms) {
  KeepTime(&stop_times_ms[unit], ms);
}

void NoteUnfinishedApply(const Journal& journal, BerthState* state) {
  if (journal.finished) return;
  // A switch is seen through once every gate of it passed: its health gate, then its smoke and
  // floor gates. One not done (pending, running when killed, failed) leaves it unfinished.
  auto gate = [](const std::string& kind) {
    for (ActionKind k :
         {ActionKind::kWaitHealthy, ActionKind::kSmoke, ActionKind::kFloor, ActionKind::kSoak})
      if (kind == ActionKindName(k)) return true;
    return false;
  };
  for (const auto& e : journal.entries)
    if (gate(e.kind) && e.status != "done" &&
        std::find(state->ungated.begin(), state->ungated.end(), e.address) == state->ungated.end())
      state->ungated.push_back(e.address);
  std::string where = "before its first action";
  for (const auto& e : journal.entries)
    if (e.status == "running" || e.status == "done")
      where = "at step " + std::to_string(e.step) + " (" + e.kind + " " + e.address + ", " +
              e.status + ")";
  state->interrupted =
      "an apply started " + journal.started + " by pid " + journal.pid + " stopped " + where;
}

namespace {

// Whether `pid` (as the journal wrote it) is a berth process alive now.
bool BerthRuns(const std::string& pid_text) {
  int pid = 0;
  auto [end, ec] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
  if (ec != std::errc() || end != pid_text.data() + pid_text.size() || pid <= 1) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;
  Result<std::string> comm =
      ReadRegularFile("/proc/" + std::to_string(pid) + "/comm", {.max_bytes = 4096});
  std::string name = comm.ok() ? *comm : "";
  if (!name.empty() && name.back() == '\n') name.pop_back();
  return name == "berth";
}

}  // namespace

BerthState ObservedState(const State& state, const StateDir& dir, bool lock_held,
                         std::string* in_progress, Journal* unfinished) {
  BerthState b = state.ToObserved();
  if (unfinished) {
    *unfinished = Journal{};
    unfinished->finished = true;
  }
  bool exists = false;
  auto journal = dir.LoadJournal(&exists);
  if (!exists || !journal.ok() || journal->finished) return b;
  if (!lock_held && BerthRuns(journal->pid)) {
    if (in_progress) *in_progress = "pid " + journal->pid + ", started " + journal->started;
    return b;
  }
  NoteUnfinishedApply(*journal, &b);
  if (unfinished) *unfinished = *journal;
  return b;
}

std::string StateToJson(const State& s) {
  ordered_json j;
  j["format_version"] = State::kFormatVersion;
  j["lineage"] = s.lineage;
  j["serial"] = s.serial;
  j["units"] = s.units;
  j["models"] = s.models;
  j["applied"] = s.applied;
  j["manifest"] = {{"digest", s.manifest_digest}, {"git_commit", s.manifest_git_commit}};
  j["last_apply"] = s.last_apply;
  ordered_json failures = ordered_json::object();
  for (const auto& [a, f] : s.failures) failures[a] = {{"time", f.time}, {"message", f.message}};
  j["failures"] = failures;
  if (!s.started.empty()) j["started"] = s.started;
  if (!s.held.empty())
    j["held"] = {{"digest", s.held.digest},
                 {"time", s.held.time},
                 {"address", s.held.address},
                 {"message", s.held.message}};
  if (!s.learned.empty()) {
    ordered_json learned = ordered_json::object();
    for (const auto& [unit, l] : s.learned) learned[unit] = LearnedToJson(l);
    j["learned"] = std::move(learned);
  }
  if (!s.start_times_ms.empty()) j["start_times_ms"] = s.start_times_ms;
  if (!s.start_invocations.empty()) j["start_invocations"] = s.start_invocations;
  if (!s.stop_times_ms.empty()) j["stop_times_ms"] = s.stop_times_ms;
  if (!s.gate_figures.empty()) j["gate_figures"] = s.gate_figures;
  return DumpJson(j, 2) + "\n";
}

Result<State> StateFromJson(const std::string& text, const std::string& source) {
  State s;
  try {
    auto j = ordered_json::parse(text);
    if (j.value("format_version", 0) != State::kFormatVersion)
      return Status::InvalidArgument(source +
                                     ": unknown format_version; written by a newer berth?");
    s.lineage = j.value("lineage", "");
    s.serial = j.value("serial", uint64_t{0});
    s.units = j.value("units", std::vector<std::string>{});
    s.models = j.value("models", std::map<std::string, std::vector<std::string>>{});
    s.applied = j.value("applied", std::map<std::string, std::string>{});
    if (j.contains("manifest")) {
      s.manifest_digest = j["manifest"].value("digest", "");
      s.manifest_git_commit = j["manifest"].value("git_commit", "");
    }
    s.last_apply = j.value("last_apply", "");
    if (j.contains("failures"))
      for (auto it = j["failures"].begin(); it != j["failures"].end(); ++it)
        s.failures[it.key()] = {it.value().value("time", ""), it.value().value("message", "")};
    s.started = j.value("started", std::map<std::string, std::pair<std::string, std::string>>{});
    if (j.contains("held"))
      s.held = {j["held"].value("digest", ""), j["held"].value("time", ""),
                j["held"].value("address", ""), j["held"].value("message", "")};
    if (j.contains("learned"))
      for (auto it = j["learned"].begin(); it != j["learned"].end(); ++it)
        s.learned[it.key()] = LearnedFromJson(it.value());
    for (auto [key, times] : {std::pair{"start_times_ms", &s.start_times_ms},
                              std::pair{"stop_times_ms", &s.stop_times_ms}}) {
      if (!j.contains(key)) continue;
      if (!j[key].is_object())
        throw std::invalid_argument(std::string(key) +
                                    ": expected an object of unit -> milliseconds");
      for (auto it = j[key].begin(); it != j[key].end(); ++it)
        (*times)[it.key()] = TimesFromJson(key, it.key(), it.value());
    }
    // Written since request-made starts were recorded; an older state has none.
    if (j.contains("start_invocations")) {
      const auto& inv = j["start_invocations"];
      if (!inv.is_object())
        throw std::invalid_argument("start_invocations: expected an object of unit -> id");
      for (auto it = inv.begin(); it != inv.end(); ++it)
        s.start_invocations[it.key()] = InvocationFromJson(it.key(), it.value());
    }
    if (j.contains("gate_figures")) {
      const auto& g = j["gate_figures"];
      if (!g.is_object())
        throw std::invalid_argument("gate_figures: expected an object of unit -> figures");
      for (auto it = g.begin(); it != g.end(); ++it) {
        if (!it.value().is_array() || it.value().size() > kGateFiguresKept)
          throw std::invalid_argument("gate_figures." + it.key() +
                                      ": expected an array of at most " +
                                      std::to_string(kGateFiguresKept) + " figures");
        std::vector<GateFigures>& out = s.gate_figures[it.key()];
        for (const auto& f : it.value()) {
          try {
            out.push_back(f.template get<GateFigures>());
          } catch (const std::invalid_argument& e) {
            throw std::invalid_argument("gate_figures." + it.key() + ": " + e.what());
          }
        }
      }
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument(source + " is damaged (" + e.what() +
                                   "); move it aside to start a new lineage (berth then prunes "
                                   "nothing it cannot prove it created)");
  }
  return s;
}

std::string JournalToJson(const Journal& j) {
  ordered_json o;
  o["started"] = j.started;
  o["pid"] = j.pid;
  o["manifest_digest"] = j.manifest_digest;
  o["finished"] = j.finished;
  ordered_json entries = ordered_json::array();
  for (const auto& e : j.entries)
    entries.push_back({{"step", e.step},
                       {"kind", e.kind},
                       {"address", e.address},
                       {"status", e.status},
                       {"message", e.message}});
  o["actions"] = entries;
  ordered_json switches = ordered_json::array();
  for (const SwitchUndo& u : j.switches) {
    // A gate as the journal keeps it: the stopped service's (under "stopped", beside its unit)
    // or the switch's own (under "gate").
    auto gate = [](const HealthStep& a) {
      return ordered_json{{"host", a.host},
                          {"port", a.port},
                          {"health_path", a.path},
                          {"served_name", a.served_name},
                          {"timeout_ms", a.timeout_ms},
                          {"interval_ms", a.interval_ms}};
    };
    ordered_json stopped = ordered_json::array();
    for (const Replaced& x : u.replaced) {
      ordered_json e = {{"unit", x.unit}, {"address", x.address}};
      e.update(gate(x.gate));
      if (x.asleep) {  // put to sleep: the undo wakes it
        e["asleep"] = true;
        e["wake"] = {
            {"host", x.wake.host}, {"port", x.wake.port}, {"timeout_ms", x.wake.timeout_ms}};
      }
      stopped.push_back(e);
    }
    ordered_json sw = {{"address", u.address}, {"unit", u.unit}, {"stopped", stopped}};
    if (u.gate.port) sw["gate"] = gate(u.gate);
    // Base64: a unit file is any bytes (an adopted one need not be UTF-8), restored byte for byte.
    if (u.unit_before) sw["unit_before_base64"] = Base64Encode(*u.unit_before);
    if (u.front_port)
      sw["front"] = {
          {"port", u.front_port}, {"socket", u.front_socket}, {"undo_route", u.undo_route}};
    switches.push_back(sw);
  }
  o["switches"] = switches;
  return DumpJson(o, 2) + "\n";
}

Result<Journal> JournalFromJson(const std::string& text, const std::string& source) {
  Journal j;
  try {
    auto o = ordered_json::parse(text);
    j.started = o.value("started", "");
    j.pid = o.value("pid", "");
    j.manifest_digest = o.value("manifest_digest", "");
    j.finished = o.value("finished", false);
    for (const auto& e : o.at("actions"))
      j.entries.push_back({e.value("step", 0), e.value("kind", ""), e.value("address", ""),
                           e.value("status", ""), e.value("message", "")});
    // A journal written before switches were kept has none: its gates are resumed, with
    // nothing to undo.
    for (const auto& sw : o.value("switches", ordered_json::array())) {
      SwitchUndo u;
      u.address = sw.at("address").get<std::string>();
      u.unit = sw.at("unit").get<std::string>();
      auto gate = [](const ordered_json& a) {
        HealthStep g;
        g.host = a.value("host", "");
        g.port = a.value("port", 0);
        g.path = a.value("health_path", "");
        g.served_name = a.value("served_name", "");
        g.timeout_ms = a.value("timeout_ms", uint64_t{0});
        g.interval_ms = a.value("interval_ms", uint64_t{0});
        return g;
      };
      for (const auto& a : sw.at("stopped")) {
        Replaced x;
        x.unit = a.at("unit").get<std::string>();
        x.address = a.value("address", "");
        x.gate = gate(a);
        x.asleep = a.value("asleep", false);
        if (a.contains("wake")) {  // a journal written before it was kept: started cold
          const auto& w = a.at("wake");
          x.wake.host = w.value("host", "");
          x.wake.port = w.value("port", 0);
          x.wake.timeout_ms = w.value("timeout_ms", uint64_t{0});
        }
        u.replaced.push_back(std::move(x));
      }
      // A journal written before the switch's own gate was kept: port 0, not waited for.
      if (sw.contains("gate")) u.gate = gate(sw.at("gate"));
      if (sw.contains("unit_before_base64")) {
        std::string bytes;
        if (!Base64Decode(sw.at("unit_before_base64").get<std::string>(), &bytes))
          return Status::InvalidArgument(source + " is damaged: the unit file kept for " + u.unit +
                                         " is not base64");
        u.unit_before = std::move(bytes);
      }
      if (sw.contains("front")) {  // behind a front: where the undo routes it back to
        const auto& f = sw.at("front");
        u.front_port = f.at("port").get<int>();
        u.front_socket = f.at("socket").get<std::string>();
        u.undo_route = f.at("undo_route").get<std::string>();
      }
      j.switches.push_back(std::move(u));
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument(source + " is damaged: " + e.what());
  }
  return j;
}

Result<State> StateDir::Load() const {
  bool exists = false;
  auto text = ReadFile(dir_ + "/state.json", &exists);
  if (!exists) return State{};  // the lineage is born with the first save
  if (!text.ok()) return text.status();
  return StateFromJson(*text, dir_ + "/state.json");
}

Status StateDir::Save(const State& state) const {
  State s = state;
  if (s.lineage.empty()) s.lineage = NewLineage();
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return Status::IoError("cannot create the state directory " + dir_ + ": " + ec.message());
  return WriteFileAtomically(dir_ + "/state.json", StateToJson(s));
}

Result<Journal> StateDir::LoadJournal(bool* exists) const {
  auto text = ReadFile(dir_ + "/journal.json", exists);
  if (!*exists) return Journal{};
  if (!text.ok()) return text.status();
  return JournalFromJson(*text, dir_ + "/journal.json");
}

Status StateDir::SaveJournal(const Journal& j) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  return WriteFileAtomically(dir_ + "/journal.json", JournalToJson(j));
}

Status StateDir::ClearJournal() const {
  if (::unlink((dir_ + "/journal.json").c_str()) != 0 && errno != ENOENT)
    return Status::IoError("cannot remove " + dir_ + "/journal.json: " + std::strerror(errno));
  return Status::Ok();
}

StateLock::~StateLock() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<StateLock>> StateLock::Acquire(const std::string& dir,
                                                      std::chrono::milliseconds timeout,
                                                      const std::string& purpose, Clock& clock) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string path = dir + "/lock";
  // Never through a link: the holder's line is written into the file, and a link there would
  // make berth truncate whatever it points at.
  Result<int> opened = OpenLockFile(path);
  if (!opened.ok()) return opened.status();
  int fd = *opened;
  auto deadline = clock.Now() + timeout;
  bool told = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      int e = errno;
      ::close(fd);
      return Status::IoError("cannot lock " + path + ": " + std::strerror(e));
    }
    char buf[512] = {};
    ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown holder";
    while (!holder.empty() && holder.back() == '\n') holder.pop_back();
    if (clock.Now() >= deadline) {
      ::close(fd);
      return Status::Unavailable("another berth holds " + path + " (" + holder +
                                 "); wait for it, or raise --lock-timeout");
    }
    if (!told) {
      spdlog::warn("waiting for the lock held by {}", holder);
      told = true;
    }
    clock.SleepFor(std::chrono::milliseconds(100));
  }
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string info = "pid " + std::to_string(::getpid()) + " on " + host + " since " +
                     NowRfc3339(clock) + " (" + purpose + ")\n";
  if (::ftruncate(fd, 0) == 0) {
    ssize_t w = ::pwrite(fd, info.data(), info.size(), 0);
    (void)w;
  }
  auto lock = std::unique_ptr<StateLock>(new StateLock());
  lock->fd_ = fd;
  return lock;
}

}  // namespace berth
