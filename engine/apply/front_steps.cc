#include "engine/apply/front_steps.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "core/atomic_file.h"
#include "core/front.h"
#include "core/read_file.h"
#include "core/safe_folder.h"
#include "core/units.h"
#include "core/untrusted_text.h"

namespace berth {
Status FrontSteps::Run(ActionKind kind, const FrontStep& a) {
  if (kind == ActionKind::kWriteFront ? a.reload && !reload_ : !connect_) return NoSeam(a);
  switch (kind) {
    case ActionKind::kWriteFront:
      return Write(a);
    case ActionKind::kRoute:
      return Route(a.socket, a.master, a.port, a.server);
    case ActionKind::kDrain:
      return Drain(a);
    case ActionKind::kReady:
      return Ready(a);
    default:
      return Status::Internal(std::string("not a front action: ") + ActionKindName(kind));
  }
}

Status FrontSteps::NoSeam(const FrontStep& a) {
  return Status::Internal(
      "no front seam (ExecutorDeps::connect_front, reload_front) to act on "
      "the front of port " +
      std::to_string(a.port));
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
  Status s = reload_(a.master, a.socket, *clock_);
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

Status FrontSteps::Route(const std::string& socket, const std::string& master, int port,
                         const std::string& server) {
  std::unique_ptr<FrontControl> f = connect_(socket, master);
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
  return connect_ ? Route(a.socket, a.master, a.port, server) : NoSeam(a);
}

Status FrontSteps::Drain(const FrontStep& a) {
  std::unique_ptr<FrontControl> f = connect_(a.socket, a.master);
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
  std::unique_ptr<FrontControl> f = connect_(a.socket, a.master);
  BERTH_RETURN_IF_ERROR(f->SetReady(a.ready));
  if (!a.ready && a.timeout_ms) {
    Say("front " + std::to_string(a.port) + ": the ready path answers 503; waiting " +
        FormatDurationMs(a.timeout_ms) + " for the outside load balancer to move traffic away");
    clock_->SleepFor(std::chrono::milliseconds(a.timeout_ms));
  }
  return Status::Ok();
}

}  // namespace berth
