#include "engine/loop/signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

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
