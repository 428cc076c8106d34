#include "engine/apply/front_steps.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "core/atomic_file.h"
#include "core/front.h"
#include "core/read_file.h"
#include "core/safe_folder.h"
#include "core/units.h"
#include "core/untrusted_text.h"

namespace berth {
namespace {

// The front's pid from `show info` ("Pid: 1234"); "" when the answer has none.
std::string PidOf(const std::string& info) {
  size_t at = info.find("\nPid: ");
  if (at == std::string::npos && info.rfind("Pid: ", 0) == 0)
    at = 0;
  else if (at != std::string::npos)
    ++at;
  if (at == std::string::npos) return "";
  size_t from = at + 5, to = from;
  while (to < info.size() && to - from < 10 && info[to] >= '0' && info[to] <= '9') ++to;
  return info.substr(from, to - from);
}

// One command on HAProxy's master CLI and its answer (at most 1 MiB; reload closes the
// connection without one). Bounded: a socket that does not answer within 5 s is an error.
Result<std::string> MasterAnswer(const std::string& master, const std::string& command) {
  sockaddr_un addr{};
  if (master.size() >= sizeof addr.sun_path)
    return Status::InvalidArgument("the front's master socket path " + master + " is too long");
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, master.data(), master.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int e = errno;
    ::close(fd);
    return Status::Unavailable("cannot reach the front's master socket " + master + ": " +
                               std::strerror(e));
  }
  // The master CLI keeps a connection open after an answer: "; quit" closes it.
  std::string line = command + "; quit\n";
  ssize_t n = ::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
  if (n != static_cast<ssize_t>(line.size())) {
    int e = errno;
    ::close(fd);
    return Status::IoError("the front's master socket " + master + ": '" + command +
                           "' not sent: " + std::strerror(e));
  }
  std::string answer;
  char buf[4096];
  for (ssize_t got; answer.size() < (1u << 20) && (got = ::recv(fd, buf, sizeof buf, 0)) > 0;)
    answer.append(buf, static_cast<size_t>(got));
  ::close(fd);
  return answer;
}

// The pids of every worker of the front, the current one and those a reload left finishing
// their connections: `show proc` lines "PID worker ...".
std::vector<std::string> WorkerPids(const std::string& show_proc) {
  std::vector<std::string> pids;
  std::istringstream lines(show_proc);
  std::string line;
  while (std::getline(lines, line) && pids.size() < 64) {
    std::istringstream words(line);
    std::string pid, type;
    if (!(words >> pid >> type) || type != "worker") continue;
    if (pid.size() > 10 || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    pids.push_back(pid);
  }
  return pids;
}

}  // namespace

std::unique_ptr<FrontControl> ConnectHaproxy(const std::string& socket) {
  HaproxyAdminOptions o;
  o.socket = socket;
  return std::make_unique<HaproxyAdmin>(o);
}

Status ReloadHaproxy(const std::string& master, const std::string& admin,
                     std::chrono::milliseconds timeout) {
  HaproxyAdminOptions o;
  o.socket = admin;
  HaproxyAdmin before(o);
  Result<std::string> info = before.Command("show info");
  std::string old_pid = info.ok() ? PidOf(*info) : "";
  // The master re-executes itself at each reload and refuses its CLI meanwhile: HaproxyMaster
  // confirms the reload by its counter, and says when the new configuration did not load.
  HaproxyAdminOptions m;
  m.socket = master;
  BERTH_RETURN_IF_ERROR(HaproxyMaster(m).Reload(RealClock(), timeout));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last = "no answer yet";
  while (std::chrono::steady_clock::now() < deadline) {
    HaproxyAdmin after(o);
    Result<std::string> now = after.Command("show info");
    if (now.ok()) {
      std::string pid = PidOf(*now);
      if (!pid.empty() && pid != old_pid) return Status::Ok();
      last = "the worker " + (pid.empty() ? std::string("(no pid)") : pid) + " still answers";
    } else {
      last = now.status().message();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Status::Unavailable("the front did not come back on its new configuration within " +
                             FormatDurationMs(static_cast<uint64_t>(timeout.count())) + " (" +
                             last + "); its old worker still holds the port");
}

Status FrontSteps::Run(ActionKind kind, const FrontStep& a) {
  switch (kind) {
    case ActionKind::kWriteFront:
      return Write(a);
    case ActionKind::kRoute:
      return Route(a.socket, a.port, a.server);
    case ActionKind::kDrain:
      return Drain(a);
    case ActionKind::kReady:
      return Ready(a);
    default:
      return Status::Internal(std::string("not a front action: ") + ActionKindName(kind));
  }
}

Status FrontSteps::Write(const FrontStep& a) {
  const std::string port = std::to_string(a.port);
  // The fronts' folder and its parents (host.front_dir, /var/lib/berth/fronts by default): the
  // configuration is what HAProxy, as root, loads at its next start.
  size_t slash = a.config.rfind('/');
  if (slash == std::string::npos || slash == 0)
    return Status::InvalidArgument("the front's configuration path '" + a.config +
                                   "' is not in a folder");
  BERTH_RETURN_IF_ERROR(
      MakeSafeFolder(a.config.substr(0, slash), "the fronts' folder (host.front_dir)"));
  // HAProxy checks the new configuration before it replaces the old one: a file it refuses
  // would keep the front from starting at its next restart.
  if (a.haproxy.empty())
    return Status::InvalidArgument("the plan names no HAProxy to check the front of port " + port +
                                   " with; make the plan again");
  const std::string candidate =
      a.config.substr(0, slash + 1) + "." + a.config.substr(slash + 1) + ".new";
  BERTH_RETURN_IF_ERROR(WriteFileAtomically(candidate, a.config_text, 0600));
  PosixCommandRunner posix;
  CommandResult check =
      (commands_ ? *commands_ : posix).Run({a.haproxy, "-c", "-q", "-f", candidate}, 30000);
  if (!check.ok()) {
    ::unlink(candidate.c_str());
    std::string said = check.started ? EscapeLine(check.output_tail) : check.error;
    return Status::FailedPrecondition(
        "HAProxy (" + a.haproxy + " -c) refuses the new configuration of the front of port " +
        port + (check.timed_out ? " (no answer within 30s)" : "") + ": " +
        (said.empty() ? std::string("no word why") : said.substr(0, 2000)) + "; " + a.config +
        " is unchanged and the front serves on as before; fix the manifest's fronts: entry");
  }
  // What the file held, put back if the running front refuses to reload on the new one.
  std::optional<std::string> before;
  FileReadOptions bounded;
  if (Result<std::string> old = ReadRegularFile(a.config, bounded); old.ok()) before = *old;
  if (::rename(candidate.c_str(), a.config.c_str()) != 0) {
    int e = errno;
    ::unlink(candidate.c_str());
    return Status::IoError("cannot replace " + a.config + ": " + std::strerror(e));
  }
  if (!a.reload) return Status::Ok();
  Status s = reload_ ? reload_(a.master, a.socket) : ReloadHaproxy(a.master, a.socket);
  if (s.ok()) {
    Say("front " + port + ": reloaded seamlessly on its new configuration");
    return Status::Ok();
  }
  Status back = before ? WriteFileAtomically(a.config, *before) : Status::Ok();
  if (!before) ::unlink(a.config.c_str());
  return s.WithContext(
      "the front of port " + port + " was not reloaded on its new configuration (" +
      (back.ok() ? "its previous configuration file is back in " + a.config
                 : "putting its previous configuration back failed: " + back.message()) +
      "; it serves on as before)");
}

Status FrontSteps::Route(const std::string& socket, int port, const std::string& server) {
  std::unique_ptr<FrontControl> f = (connect_ ? connect_ : ConnectHaproxy)(socket);
  Status s = server == kFrontHoldServer ? f->Hold() : f->Route(server);
  if (!s.ok())
    return s.WithContext(
        "the front of port " + std::to_string(port) + " could not " +
        (server == kFrontHoldServer ? std::string("hold requests") : "route to " + server));
  Say("front " + std::to_string(port) + ": " +
      (server == kFrontHoldServer ? std::string("holding new requests")
                                  : "new requests go to " + server));
  return Status::Ok();
}

Status FrontSteps::RouteBack(const FrontStep& a, const std::string& server) {
  return Route(a.socket, a.port, server);
}

Result<int64_t> SessionsInEveryWorker(const std::string& master, const std::string& server) {
  Result<std::string> procs = MasterAnswer(master, "show proc");
  if (!procs.ok()) return procs.status();
  int64_t total = 0;
  for (const std::string& pid : WorkerPids(*procs)) {
    Result<std::string> csv = MasterAnswer(master, "@!" + pid + " show stat");
    if (!csv.ok()) continue;  // a worker that just exited
    Result<FrontStats> stats = ParseShowStat(*csv);
    if (!stats.ok()) continue;
    if (const FrontServerStats* sv = stats->Server(server)) total += sv->current_sessions;
  }
  return total;
}

namespace {

// Requests in flight on a server, counted in every worker of the front: a seamless reload
// leaves the old worker carrying the streams it had, which the new worker's counters miss.
class EveryWorker : public FrontControl {
 public:
  EveryWorker(std::unique_ptr<FrontControl> current, std::string master)
      : current_(std::move(current)), master_(std::move(master)) {}
  Status Route(const std::string& server) override { return current_->Route(server); }
  Status Hold() override { return current_->Hold(); }
  Status Drain(const std::string& server) override { return current_->Drain(server); }
  Result<int64_t> Sessions(const std::string& server) override {
    Result<int64_t> all = SessionsInEveryWorker(master_, server);
    return all.ok() ? all : current_->Sessions(server);
  }
  Status SetReady(bool ready) override { return current_->SetReady(ready); }
  Result<FrontStats> Stats() override { return current_->Stats(); }

 private:
  std::unique_ptr<FrontControl> current_;
  std::string master_;
};

}  // namespace

Status FrontSteps::Drain(const FrontStep& a) {
  std::unique_ptr<FrontControl> f = (connect_ ? connect_ : ConnectHaproxy)(a.socket);
  if (!connect_ && !a.master.empty()) f = std::make_unique<EveryWorker>(std::move(f), a.master);
  Status s = WaitForNoSessions(*f, a.server, *clock_, std::chrono::milliseconds(a.timeout_ms));
  Say("front " + std::to_string(a.port) + ": " + a.server +
      (s.ok() ? " drained: no request in flight"
              : " did not drain (" + EscapeLine(s.message()) + "); its stop ends what is left"));
  // A drain that runs out is not a failure: the bound is the manifest's word on how long
  // to wait. A front that cannot be asked is.
  if (!s.ok() && s.code() != Status::Code::kUnavailable) return s;
  return Status::Ok();
}

Status FrontSteps::Ready(const FrontStep& a) {
  std::unique_ptr<FrontControl> f = (connect_ ? connect_ : ConnectHaproxy)(a.socket);
  BERTH_RETURN_IF_ERROR(f->SetReady(a.ready));
  if (!a.ready && a.timeout_ms) {
    Say("front " + std::to_string(a.port) + ": the ready path answers 503; waiting " +
        FormatDurationMs(a.timeout_ms) + " for the outside load balancer to move traffic away");
    clock_->SleepFor(std::chrono::milliseconds(a.timeout_ms));
  }
  return Status::Ok();
}

}  // namespace berth
