// The CLI's commands as functions of their options and output streams, so tests run them
// exactly as `berth` does. Each returns the process exit code.
#pragma once

#include <istream>
#include <ostream>
#include <string>
#include <vector>

namespace berth {

/// Exit codes of `berth plan` (with --detailed-exitcode) and of the other commands.
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,    // invalid input, unreadable file, failed command
  kExitChanges = 2,  // plan --detailed-exitcode: there is something to do
  kExitBlocked = 3,  // the plan cannot run: what is short is printed
  kExitFailed = 4,   // apply: an action failed; what was done and the unit's journal are printed
};

/// Where the live host is reached (production defaults; tests point them at a sandbox).
struct HostAccess {
  std::string bus_address;  // "" = the system bus (DBUS_SYSTEM_BUS_ADDRESS is honoured)
  std::string journal_dir;  // "" = the local journal
  std::string nvml_library = "libnvidia-ml.so.1";  // dlopen name or path
};

struct ApplyCommand {
  std::string manifest_path;  // -f
  bool yes = false;           // do not ask
  HostAccess host;
};

struct PlanCommand {
  std::string manifest_path;    // -f
  std::string observed_path;    // --observed; "" = observe this host
  HostAccess host;              // when observing this host
  std::string format = "text";  // -o text|json
  bool detailed_exitcode = false;
};

/// Observe, plan, show, ask (unless yes), execute, then check that nothing is left to do.
int RunApply(const ApplyCommand& cmd, std::istream& in, std::ostream& out, std::ostream& err);
/// What berth sees on this host; format "text" or "json" (the --observed format).
int RunObserve(const std::string& manifest_path, const std::string& format, const HostAccess& host,
               std::ostream& out, std::ostream& err);

struct PullCommand {
  std::string source;  // hf://org/name[@revision]
  std::string store;   // "" = HF_HUB_CACHE or the usual HF_HOME location
  std::vector<std::string> include, exclude;
  int connections = 0;  // 0 = default
};
/// One model into the store, outside any manifest.
int RunPull(const PullCommand& cmd, std::ostream& out, std::ostream& err);
/// Re-hashes `source`'s snapshot (hf://org/name@commit, or every complete snapshot of the repo)
/// against berth's record of it (or the Hub's listing); reports corrupt, missing, extra files.
int RunVerify(const std::string& source, const std::string& store, std::ostream& out,
              std::ostream& err);

int RunValidate(const std::string& manifest_path, std::ostream& out, std::ostream& err);
int RunPlan(const PlanCommand& cmd, std::ostream& out, std::ostream& err);
/// Prints the unit files berth would write (all services, or only `service`).
int RunRender(const std::string& manifest_path, const std::string& observed_path,
              const std::string& service, std::ostream& out, std::ostream& err);

}  // namespace berth
