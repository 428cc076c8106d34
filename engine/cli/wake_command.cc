// The hidden subcommands the units of an on-demand service run (docs/operating.md "On-demand
// services"): `berth __wait-healthy` in the model server's ExecStartPost=, `berth __wake-proxy`
// as the proxy unit's ExecStart=.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "engine/cli/commands.h"
#include "providers/http/loopback.h"

namespace berth {
namespace {

constexpr int kListenFd = 3;  // SD_LISTEN_FDS_START: the socket unit's one listening socket

bool Healthy(const std::string& url, long timeout_ms, std::string* last) {
  LoopbackLimits limits;
  limits.connect_timeout_ms = std::min(2000L, timeout_ms);
  limits.total_timeout_ms = std::min(10000L, timeout_ms);
  limits.max_body_bytes = 64 << 10;
  LoopbackAnswer a = LoopbackRequest("GET", url, "", limits);
  if (a.status == 200) return true;
  *last = a.error.empty() ? "GET " + url + ": " + std::to_string(a.status) : a.error;
  return false;
}

// Whether process `pid` is gone (0: none named, never gone).
bool Gone(pid_t pid) { return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH; }

// Polls `url` every 20 ms (a loopback GET: a refused connect while the server loads, a few
// hundred bytes once it listens) until it answers 200 or `timeout_ms` passes, or process
// `server_pid` (0: none) is gone. Every poll's wait lands in a first request's: at 200 ms,
// tests/bench/on_demand saw 52-124 ms (median) between the server's health and its unit active.
bool WaitHealthy(const std::string& url, uint64_t timeout_ms, std::string* last,
                 pid_t server_pid = 0) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    end - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return false;
    if (Healthy(url, static_cast<long>(left), last)) return true;
    if (Gone(server_pid)) {
      *last = "its main process (pid " + std::to_string(server_pid) + ") exited; " + *last;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Answers each connection waiting on the listening socket with a 503 that says why, so that a
// client of a model that did not start gets an error instead of waiting in the backlog.
void RefuseWaiting(const std::string& why) {
  ::fcntl(kListenFd, F_SETFL, ::fcntl(kListenFd, F_GETFL) | O_NONBLOCK);
  std::string body = "{\"error\": {\"message\": \"" + why +
                     "\", \"type\": \"service_unavailable\", \"code\": 503}}\n";
  std::string answer =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
      "Connection: close\r\nRetry-After: 1\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  for (;;) {
    int c = ::accept4(kListenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) break;
    // The request is read as far as it came, so that the close sends no reset over the answer.
    char buf[65536];
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    (void)::recv(c, buf, sizeof buf, MSG_DONTWAIT);
    (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
    ::shutdown(c, SHUT_WR);
    ::close(c);
  }
}

// JSON-safe text: quotes and backslashes dropped, control characters as spaces.
std::string Plain(std::string s) {
  for (char& c : s)
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = ' ';
  return s;
}

}  // namespace

int RunHiddenCommand(int argc, char** argv, std::ostream& err) {
  std::string cmd = argv[1];
  if (cmd == "__wait-healthy" && argc == 5 && std::string(argv[3]) == "--timeout-ms") {
    // systemd waits for ExecStartPost= even when the main process has died meanwhile: a server
    // that exits at start must end the wait at once, not after the health timeout, or its
    // first request waits that long for its 503. systemd names the main process in $MAINPID.
    const char* main_pid = std::getenv("MAINPID");
    std::string last;
    if (WaitHealthy(argv[2], std::strtoull(argv[4], nullptr, 10), &last,
                    main_pid ? static_cast<pid_t>(std::atoi(main_pid)) : 0))
      return 0;
    err << "berth: not healthy (waited at most " << argv[4] << " ms): " << last << "\n";
    return 1;
  }
  // __wake-proxy UNIT URL -- PROXYD ARGS...: the model server UNIT is started (the unit's
  // Wants= and After=); when URL answers 200, exec the proxy on the socket; else answer the
  // connections waiting with 503 and exit, so that the next connection starts UNIT again.
  if (cmd == "__wake-proxy" && argc >= 6 && std::string(argv[4]) == "--") {
    std::string last;
    if (WaitHealthy(argv[3], 2000, &last)) {
      ::execv(argv[5], argv + 5);
      err << "berth: cannot run " << argv[5] << "\n";
      RefuseWaiting(Plain(std::string("berth could not run ") + argv[5]));
      return 1;
    }
    err << "berth: " << argv[2] << " is not healthy (" << last
        << "): answering the waiting requests with 503\n";
    RefuseWaiting(Plain(std::string("the model server ") + argv[2] +
                        " did not start (journalctl -u " + argv[2] + " says why): " + last +
                        "; the next request starts it again"));
    return 0;
  }
  err << "berth: usage: berth __wait-healthy URL --timeout-ms N | berth __wake-proxy UNIT URL -- "
         "PROXYD ARGS...\n";
  return 1;
}

}  // namespace berth
