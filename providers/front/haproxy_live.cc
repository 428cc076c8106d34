#include "providers/front/haproxy_live.h"

#include <sstream>
#include <vector>

#include "core/units.h"

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

// Requests in flight on a server, counted in every worker of the front: a seamless reload
// leaves the old worker carrying the streams it had, which the new worker's counters miss.
class EveryWorker : public HaproxyAdmin {
 public:
  EveryWorker(HaproxyAdminOptions admin, std::string master) : HaproxyAdmin(std::move(admin)) {
    master_.socket = std::move(master);
  }
  Result<int64_t> Sessions(const std::string& server) override {
    Result<std::string> procs = HaproxyCommand(master_, "show proc");
    if (!procs.ok()) return HaproxyAdmin::Sessions(server);
    int64_t total = 0;
    for (const std::string& pid : WorkerPids(*procs)) {
      Result<std::string> csv = HaproxyCommand(master_, "@!" + pid + " show stat");
      if (!csv.ok()) continue;  // a worker that just exited
      Result<FrontStats> stats = ParseShowStat(*csv);
      if (!stats.ok()) continue;
      if (const FrontServerStats* sv = stats->Server(server)) total += sv->current_sessions;
    }
    return total;
  }

 private:
  HaproxyAdminOptions master_;
};

}  // namespace

std::unique_ptr<FrontControl> ConnectHaproxy(const std::string& socket, const std::string& master) {
  HaproxyAdminOptions o;
  o.socket = socket;
  if (master.empty()) return std::make_unique<HaproxyAdmin>(o);
  return std::make_unique<EveryWorker>(o, master);
}

Status ReloadHaproxy(const std::string& master, const std::string& admin, Clock& clock,
                     std::chrono::milliseconds timeout) {
  HaproxyAdminOptions o;
  o.socket = admin;
  Result<std::string> info = HaproxyCommand(o, "show info");
  std::string old_pid = info.ok() ? PidOf(*info) : "";
  // The master re-executes itself at each reload and refuses its CLI meanwhile: HaproxyMaster
  // confirms the reload by its counter, and says when the new configuration did not load.
  HaproxyAdminOptions m;
  m.socket = master;
  BERTH_RETURN_IF_ERROR(HaproxyMaster(m).Reload(clock, timeout));
  auto deadline = clock.Now() + timeout;
  std::string last = "no answer yet";
  while (clock.Now() < deadline) {
    Result<std::string> now = HaproxyCommand(o, "show info");
    if (now.ok()) {
      std::string pid = PidOf(*now);
      if (!pid.empty() && pid != old_pid) return Status::Ok();
      last = "the worker " + (pid.empty() ? std::string("(no pid)") : pid) + " still answers";
    } else {
      last = now.status().message();
    }
    clock.SleepFor(std::chrono::milliseconds(50));
  }
  return Status::Unavailable("the front did not come back on its new configuration within " +
                             FormatDurationMs(static_cast<uint64_t>(timeout.count())) + " (" +
                             last + "); its old worker still holds the port");
}

}  // namespace berth
