#include "engine/loop/clock.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace berth {
namespace {

std::atomic<bool> g_loop_stop{false};
std::atomic<bool> g_loop_reload{false};
int g_wake_pipe[2] = {-1, -1};

void WakeUp() {
  if (g_wake_pipe[1] < 0) return;
  int saved = errno;
  char b = 1;
  (void)!::write(g_wake_pipe[1], &b, 1);  // non-blocking; a full pipe is awake enough
  errno = saved;
}

void OnStop(int) {
  g_loop_stop.store(true);
  WakeUp();
}

void OnReload(int) {
  g_loop_reload.store(true);
  WakeUp();
}

}  // namespace

LoopClock::TimePoint SystemLoopClock::Now() { return std::chrono::steady_clock::now(); }

double SystemLoopClock::UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void SystemLoopClock::SleepUntil(TimePoint deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Now());
  if (left.count() <= 0) return;
  int timeout = static_cast<int>(std::min<int64_t>(left.count(), 24 * 3600 * 1000));
  if (wake_fd_ < 0) {
    ::poll(nullptr, 0, timeout);
    return;
  }
  pollfd p{wake_fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout) > 0 && (p.revents & POLLIN)) {
    char buf[64];
    while (::read(wake_fd_, buf, sizeof buf) > 0) {
    }
  }
}

LoopSignals InstallLoopSignals() {
  static bool installed = false;
  if (!installed) {
    installed = true;
    // Without the pipe the flags still work; sleeps then end only at their deadline.
    if (::pipe2(g_wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_wake_pipe[0] = g_wake_pipe[1] = -1;
    struct sigaction stop {};
    stop.sa_handler = OnStop;
    stop.sa_flags = SA_RESETHAND;  // a second SIGINT/SIGTERM kills as usual
    sigaction(SIGINT, &stop, nullptr);
    sigaction(SIGTERM, &stop, nullptr);
    struct sigaction reload {};
    reload.sa_handler = OnReload;
    reload.sa_flags = SA_RESTART;
    sigaction(SIGHUP, &reload, nullptr);
  }
  return {&g_loop_stop, &g_loop_reload, g_wake_pipe[0]};
}

}  // namespace berth
