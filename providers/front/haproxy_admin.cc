#include "providers/front/haproxy_admin.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <sstream>

#include "core/front.h"
#include "core/untrusted_text.h"

namespace berth {

const FrontServerStats* FrontStats::Server(std::string_view name) const {
  for (const FrontServerStats& s : servers) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

namespace {

std::vector<std::string_view> SplitCsv(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t comma = line.find(',', start);
    if (comma == std::string_view::npos) {
      out.push_back(line.substr(start));
      return out;
    }
    out.push_back(line.substr(start, comma - start));
    start = comma + 1;
  }
}

bool ParseCount(std::string_view field, int64_t* out) {
  if (field.empty()) {
    *out = 0;
    return true;
  }
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), *out);
  return ec == std::errc() && end == field.data() + field.size() && *out >= 0;
}

}  // namespace

Result<FrontStats> ParseShowStat(std::string_view csv) {
  size_t eol = csv.find('\n');
  std::string_view header = csv.substr(0, eol);
  if (header.substr(0, 2) != "# ")
    return Status::InvalidArgument("show stat: no header line, got '" + Excerpt(header, 80) + "'");
  std::map<std::string_view, size_t> column;
  std::vector<std::string_view> names = SplitCsv(header.substr(2));
  for (size_t i = 0; i < names.size(); ++i) column.emplace(names[i], i);
  static constexpr const char* kNeeded[] = {"pxname", "svname", "qcur",   "scur",    "stot",
                                            "wretr",  "wredis", "status", "req_tot", "hrsp_5xx"};
  for (const char* name : kNeeded) {
    if (!column.count(name))
      return Status::InvalidArgument(std::string("show stat: the header has no column ") + name);
  }
  FrontStats stats;
  size_t line_no = 1;
  size_t pos = eol == std::string_view::npos ? csv.size() : eol + 1;
  while (pos < csv.size()) {
    size_t end = csv.find('\n', pos);
    std::string_view line = csv.substr(pos, end == std::string_view::npos ? end : end - pos);
    pos = end == std::string_view::npos ? csv.size() : end + 1;
    ++line_no;
    if (line.empty()) continue;
    std::vector<std::string_view> f = SplitCsv(line);
    auto where = [&line_no] { return "show stat line " + std::to_string(line_no); };
    if (f.size() < names.size())
      return Status::InvalidArgument(where() + ": " + std::to_string(f.size()) + " fields of " +
                                     std::to_string(names.size()) + " (a cut answer?)");
    auto count = [&](const char* name, int64_t* out) -> Status {
      std::string_view v = f[column.at(name)];
      if (!ParseCount(v, out))
        return Status::InvalidArgument(where() + ": " + name + " is '" + Excerpt(v, 40) +
                                       "', not a count");
      return Status::Ok();
    };
    std::string_view proxy = f[column.at("pxname")];
    std::string_view server = f[column.at("svname")];
    if (proxy == kFrontProxy && server == "FRONTEND") {
      BERTH_RETURN_IF_ERROR(count("req_tot", &stats.requests));
      BERTH_RETURN_IF_ERROR(count("hrsp_5xx", &stats.responses_5xx));
      BERTH_RETURN_IF_ERROR(count("scur", &stats.current_sessions));
    } else if (proxy == kFrontBackend && server == "BACKEND") {
      BERTH_RETURN_IF_ERROR(count("wretr", &stats.retries));
      BERTH_RETURN_IF_ERROR(count("wredis", &stats.redispatches));
      BERTH_RETURN_IF_ERROR(count("qcur", &stats.queued));
    } else if (proxy == kFrontBackend && server != "FRONTEND") {
      FrontServerStats s;
      s.name = std::string(Utf8Prefix(server, 200));
      s.status = std::string(Utf8Prefix(f[column.at("status")], 100));
      BERTH_RETURN_IF_ERROR(count("scur", &s.current_sessions));
      BERTH_RETURN_IF_ERROR(count("stot", &s.total_sessions));
      BERTH_RETURN_IF_ERROR(count("hrsp_5xx", &s.responses_5xx));
      BERTH_RETURN_IF_ERROR(count("wretr", &s.retries));
      BERTH_RETURN_IF_ERROR(count("wredis", &s.redispatches));
      BERTH_RETURN_IF_ERROR(count("qcur", &s.queued));
      stats.servers.push_back(std::move(s));
    } else if (proxy.starts_with(kRoutedBackendPrefix) && server != "BACKEND" &&
               server != "FRONTEND" && server != kFrontHoldServer) {
      stats.routed.push_back(std::string(Utf8Prefix(proxy, 210)) + "/" +
                             std::string(Utf8Prefix(server, 200)));
    }
  }
  return stats;
}

namespace {

using SteadyClock = std::chrono::steady_clock;

int MsLeft(SteadyClock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

/// Closes a descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

/// A server name as berth writes one into a command: planners' names, nothing the CLI splits.
bool IsServerName(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

/// An answer to `set server`: empty when it was done.
Status ExpectEmpty(const std::string& command, const Result<std::string>& answer) {
  if (!answer.ok()) return answer.status();
  if (answer->find_first_not_of(" \r\n") == std::string::npos) return Status::Ok();
  return Status::FailedPrecondition("haproxy refused '" + command + "': " + Excerpt(*answer));
}

}  // namespace

Result<std::string> HaproxyCommand(const HaproxyAdminOptions& options, const std::string& command) {
  const std::string where =
      "haproxy admin socket " + Excerpt(options.socket) + ", '" + Excerpt(command, 80) + "'";
  if (command.find_first_of("\n\r;") != std::string::npos || command.empty())
    return Status::InvalidArgument(where + ": an empty command, or one with a newline or ';'");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (options.socket.empty() || options.socket.size() >= sizeof(addr.sun_path))
    return Status::InvalidArgument(where + ": the socket path is empty or too long");
  memcpy(addr.sun_path, options.socket.data(), options.socket.size());
  const auto deadline = SteadyClock::now() + options.timeout;
  Fd fd{socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)};
  if (fd.fd < 0) return Status::IoError(where + ": socket: " + strerror(errno));
  if (connect(fd.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN)
      return Status::Unavailable(where + ": connect: " + strerror(errno));
    pollfd p{fd.fd, POLLOUT, 0};
    if (poll(&p, 1, MsLeft(deadline)) <= 0)
      return Status::Unavailable(where + ": connect timed out");
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(fd.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Status::Unavailable(where + ": connect: " + strerror(err));
  }
  const std::string line = command + "\n";
  size_t sent = 0;
  while (sent < line.size()) {
    ssize_t n = send(fd.fd, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd.fd, POLLOUT, 0};
      if (poll(&p, 1, MsLeft(deadline)) <= 0)
        return Status::Unavailable(where + ": sending timed out");
      continue;
    }
    return Status::Unavailable(where + ": send: " + strerror(errno));
  }
  // The end of our input: without it the master CLI (2.6) keeps the connection open after
  // answering; the stats socket answers the one command either way, then closes.
  shutdown(fd.fd, SHUT_WR);
  std::string answer;
  char buf[16384];
  for (;;) {
    ssize_t n = recv(fd.fd, buf, sizeof(buf), 0);
    if (n == 0) return answer;
    if (n > 0) {
      if (answer.size() + static_cast<size_t>(n) > options.max_answer_bytes)
        return Status::IoError(where + ": the answer is longer than " +
                               std::to_string(options.max_answer_bytes) + " bytes");
      answer.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd.fd, POLLIN, 0};
      int ready = poll(&p, 1, MsLeft(deadline));
      if (ready == 0 || (ready < 0 && errno != EINTR))
        return Status::Unavailable(where + ": no complete answer within " +
                                   std::to_string(options.timeout.count()) + " ms");
      continue;
    }
    return Status::Unavailable(where + ": recv: " + strerror(errno));
  }
}

Status HaproxyAdmin::SetState(const std::string& backend, const std::string& server,
                              const char* state) {
  if (!IsServerName(server))
    return Status::InvalidArgument("haproxy admin socket " + Excerpt(options_.socket) +
                                   ": server name '" + Excerpt(server, 80) +
                                   "' is not [A-Za-z0-9_.-]+");
  std::string command = "set server " + backend + "/" + server + " state " + state;
  return ExpectEmpty(command, Command(command));
}

Status HaproxyAdmin::Route(const std::string& server) {
  auto stats = Stats();
  if (!stats.ok()) return stats.status();
  if (!stats->Server(server))
    return Status::NotFound("haproxy admin socket " + Excerpt(options_.socket) + ": backend " +
                            kFrontBackend + " has no server '" + Excerpt(server, 80) + "'");
  // Ready first, then the others out: there is never a moment with no server to pick.
  BERTH_RETURN_IF_ERROR(SetState(kFrontBackend, server, "ready"));
  for (const FrontServerStats& s : stats->servers) {
    if (s.name != server) BERTH_RETURN_IF_ERROR(SetState(kFrontBackend, s.name, "maint"));
  }
  return Status::Ok();
}

Status HaproxyAdmin::Hold() {
  auto stats = Stats();
  if (!stats.ok()) return stats.status();
  BERTH_RETURN_IF_ERROR(SetState(kFrontBackend, kFrontHoldServer, "ready"));
  for (const FrontServerStats& s : stats->servers) {
    if (s.name == kFrontHoldServer || s.status.rfind("MAINT", 0) == 0) continue;
    BERTH_RETURN_IF_ERROR(SetState(kFrontBackend, s.name, "drain"));
  }
  return Status::Ok();
}

Status HaproxyAdmin::Drain(const std::string& server) {
  return SetState(kFrontBackend, server, "drain");
}

Result<int64_t> HaproxyAdmin::Sessions(const std::string& server) {
  auto stats = Stats();
  if (!stats.ok()) return stats.status();
  const FrontServerStats* s = stats->Server(server);
  if (!s)
    return Status::NotFound("haproxy admin socket " + Excerpt(options_.socket) + ": backend " +
                            kFrontBackend + " has no server '" + Excerpt(server, 80) + "'");
  return s->current_sessions;
}

Status HaproxyAdmin::SetReady(bool ready) {
  return SetState(kFrontReadyBackend, kFrontReadyBackend, ready ? "ready" : "maint");
}

Result<FrontStats> HaproxyAdmin::Stats() {
  auto answer = Command("show stat");
  if (!answer.ok()) return answer.status();
  auto stats = ParseShowStat(*answer);
  if (!stats.ok())
    return stats.status().WithContext("haproxy admin socket " + Excerpt(options_.socket));
  return stats;
}

Result<HaproxyMaster::Reloads> ParseShowProc(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string_view line = text.substr(pos, end == std::string_view::npos ? end : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    // "30747           master          1 [failed: 0]   0d00h00m01s     2.6.12"
    std::vector<std::string_view> words;
    for (size_t i = 0; i < line.size();) {
      while (i < line.size() && line[i] == ' ') ++i;
      size_t start = i;
      while (i < line.size() && line[i] != ' ') ++i;
      if (i > start) words.push_back(line.substr(start, i - start));
    }
    if (words.size() < 5 || words[1] != "master") continue;
    HaproxyMaster::Reloads r;
    std::string_view failed = words[4];
    if (words[3] != "[failed:" || failed.empty() || failed.back() != ']' ||
        !ParseCount(words[2], &r.done) ||
        !ParseCount(failed.substr(0, failed.size() - 1), &r.failed))
      return Status::InvalidArgument("show proc: the master line is '" + Excerpt(line, 120) + "'");
    return r;
  }
  return Status::InvalidArgument("show proc: no master line in '" + Excerpt(text, 120) + "'");
}

Result<HaproxyMaster::Reloads> HaproxyMaster::Count() {
  auto answer = HaproxyCommand(options_, "show proc");
  if (!answer.ok()) return answer.status();
  auto count = ParseShowProc(*answer);
  if (!count.ok())
    return count.status().WithContext("haproxy master socket " + Excerpt(options_.socket));
  return count;
}

Status HaproxyMaster::Reload(Clock& clock, std::chrono::milliseconds timeout) {
  const auto deadline = clock.Now() + timeout;
  const auto poll = std::chrono::milliseconds(100);
  // The master may be re-executing (just started, or reloading): wait until it answers.
  Result<Reloads> before = Count();
  while (!before.ok() && clock.Now() < deadline) {
    clock.SleepFor(poll);
    before = Count();
  }
  if (!before.ok()) return before.status();
  while (clock.Now() < deadline) {
    // The answer is empty (2.6); the connection closes as the master re-executes.
    auto asked = HaproxyCommand(options_, "reload");
    for (int i = 0; i < 20 && clock.Now() < deadline; ++i) {
      clock.SleepFor(poll);
      auto now = Count();
      if (!now.ok()) continue;  // re-executing
      if (now->done > before->done) {
        if (now->failed > before->failed)
          return Status::FailedPrecondition("haproxy master socket " + Excerpt(options_.socket) +
                                            ": the reload failed (the old worker serves on)");
        return Status::Ok();
      }
      if (asked.ok()) continue;  // asked: give it the 2 s of this round
      break;                     // not asked (refused): ask again
    }
  }
  return Status::Unavailable("haproxy master socket " + Excerpt(options_.socket) +
                             ": no reload counted within " + std::to_string(timeout.count()) +
                             " ms");
}

Status WaitForNoSessions(FrontControl& front, const std::string& server, Clock& clock,
                         std::chrono::milliseconds timeout, std::chrono::milliseconds interval) {
  const auto deadline = clock.Now() + timeout;
  for (;;) {
    auto sessions = front.Sessions(server);
    if (!sessions.ok()) return sessions.status();
    if (*sessions == 0) return Status::Ok();
    if (clock.Now() >= deadline)
      return Status::Unavailable("front server '" + server + "' still carries " +
                                 std::to_string(*sessions) + " stream(s) after " +
                                 std::to_string(timeout.count()) + " ms");
    auto next = clock.Now() + interval;
    clock.SleepUntil(next < deadline ? next : deadline);
  }
}

}  // namespace berth

namespace berth {

std::string FrontAsRunning(const std::string& file_text, const FrontStats& running) {
  // The file's servers: "  server NAME ..." lines of "backend models".
  // And a routed front's: "model-NAME/SERVER" of each "backend model-NAME", hold left out.
  std::vector<std::string> in_file, routed_in_file;
  std::istringstream lines(file_text);
  std::string line;
  bool in_models = false;
  std::string routed_backend;  // the "backend model-NAME" the line is in, or ""
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] != ' ' && line[0] != '#') {
      in_models = line == std::string("backend ") + kFrontBackend;
      const std::string routed = std::string("backend ") + kRoutedBackendPrefix;
      routed_backend = line.rfind(routed, 0) == 0 ? line.substr(8) : "";
    }
    std::istringstream words(line);
    std::string verb, name;
    if (!(words >> verb >> name) || verb != "server") continue;
    if (in_models) in_file.push_back(name);
    if (!routed_backend.empty() && name != kFrontHoldServer)
      routed_in_file.push_back(routed_backend + "/" + name);
  }
  std::vector<std::string> serves;
  std::vector<std::string> ready;  // neither in maintenance nor draining
  for (const FrontServerStats& s : running.servers) {
    serves.push_back(s.name);
    if (s.status.rfind("MAINT", 0) != 0 && s.status.rfind("DRAIN", 0) != 0) ready.push_back(s.name);
  }
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  auto list = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& n : v) out += (out.empty() ? "" : ", ") + n.substr(0, 64);
    return out.empty() ? std::string("none") : out;
  };
  if (sorted(in_file) != sorted(serves))
    return file_text + "# berth: the running front serves " + list(serves) +
           ", not the servers of this file (" + list(in_file) + ")\n";
  if (sorted(routed_in_file) != sorted(running.routed))
    return file_text + "# berth: the running front routes to " + list(running.routed) +
           ", not to the model servers of this file (" + list(routed_in_file) + ")\n";
  const std::string prefix = kFrontActiveLine;
  if (ready.size() != 1 || file_text.rfind(prefix, 0) != 0) return file_text;
  size_t end = file_text.find('\n');
  std::string said = file_text.substr(
      prefix.size(), end == std::string::npos ? std::string::npos : end - prefix.size());
  if (said == ready[0]) return file_text;
  return prefix + ready[0] + (end == std::string::npos ? "" : file_text.substr(end)) +
         "# berth: this file routes to " + said.substr(0, 64) + "; the running front routes to " +
         ready[0] + "\n";
}

}  // namespace berth
