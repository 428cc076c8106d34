#include "tests/providers/front_harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace berth::testing {

namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

bool SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = Loopback(0);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

bool TinyHttpServer::Start() {
  stop_ = false;
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a = Loopback(port_);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(listen_fd_, 512) != 0) {
    close(listen_fd_);
    listen_fd_ = -1;
    return false;
  }
  acceptor_ = std::thread([this] {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard<std::mutex> lock(mu_);
      workers_.emplace_back([this, fd] { Serve(fd); });
    }
  });
  return true;
}

void TinyHttpServer::Stop() {
  if (listen_fd_ < 0) return;
  stop_ = true;
  acceptor_.join();
  close(listen_fd_);
  listen_fd_ = -1;
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers.swap(workers_);
  }
  for (auto& t : workers) t.join();
}

void TinyHttpServer::Serve(int fd) {
  std::string in;
  char buf[65536];
  size_t head_end = std::string::npos;
  size_t want = 0;
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (;;) {
    if (head_end != std::string::npos && in.size() >= head_end + 4 + want) break;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      close(fd);
      return;
    }
    in.append(buf, static_cast<size_t>(n));
    if (head_end == std::string::npos) {
      head_end = in.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::string head = Lower(in.substr(0, head_end));
        size_t cl = head.find("content-length:");
        if (cl != std::string::npos) want = std::strtoull(head.c_str() + cl + 15, nullptr, 10);
      }
    }
  }
  std::string method = in.substr(0, in.find(' '));
  size_t path_start = in.find(' ') + 1;
  std::string path = in.substr(path_start, in.find(' ', path_start) - path_start);
  if (path.rfind("/stream?n=", 0) == 0) {
    int chunks = std::atoi(path.c_str() + 10);
    bool ok = SendAll(fd,
                      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    for (int i = 0; ok && i < chunks; ++i) {
      std::string data = name_ + " tok " + std::to_string(i) + "\n";
      std::ostringstream chunk;
      chunk << std::hex << data.size() << "\r\n" << data << "\r\n";
      ok = SendAll(fd, chunk.str());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (ok) SendAll(fd, "0\r\n\r\n");
  } else {
    std::string body = name_ + " " + method + " " + std::to_string(want) + "\n";
    SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
  }
  ++answered_;
  shutdown(fd, SHUT_WR);
  while (recv(fd, buf, sizeof(buf), 0) > 0) {
  }
  close(fd);
}

HttpAnswer HttpCall(int port, const std::string& method, const std::string& path,
                    const std::string& body, int timeout_ms) {
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: front\r\nConnection: close\r\n";
  if (method == "POST")
    request +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  return HttpSend(port, request + "\r\n" + body, timeout_ms);
}

HttpAnswer HttpSend(int port, const std::string& request, int timeout_ms) {
  HttpAnswer a;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr = Loopback(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    a.outcome = errno == ECONNREFUSED ? HttpAnswer::Outcome::kRefused : HttpAnswer::Outcome::kError;
    a.error = std::string("connect: ") + strerror(errno);
    close(fd);
    return a;
  }
  std::string in;
  if (!SendAll(fd, request)) {
    a.outcome = errno == ECONNRESET || errno == EPIPE ? HttpAnswer::Outcome::kReset
                                                      : HttpAnswer::Outcome::kError;
    a.error = std::string("send: ") + strerror(errno);
    close(fd);
    return a;
  }
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n > 0) {
      in.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    a.outcome = errno == ECONNRESET                         ? HttpAnswer::Outcome::kReset
                : (errno == EAGAIN || errno == EWOULDBLOCK) ? HttpAnswer::Outcome::kTimeout
                                                            : HttpAnswer::Outcome::kError;
    a.error =
        std::string("recv: ") + strerror(errno) + " after " + std::to_string(in.size()) + " bytes";
    close(fd);
    return a;
  }
  close(fd);
  size_t head_end = in.find("\r\n\r\n");
  if (in.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) {
    a.outcome = in.empty() ? HttpAnswer::Outcome::kReset : HttpAnswer::Outcome::kError;
    a.error = "no HTTP answer (" + std::to_string(in.size()) + " bytes)";
    return a;
  }
  a.outcome = HttpAnswer::Outcome::kAnswered;
  a.status = std::atoi(in.c_str() + 9);
  a.head = Lower(in.substr(0, head_end));
  a.body = in.substr(head_end + 4);
  return a;
}

std::string UnixCommand(const std::string& socket_path, const std::string& command) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  strncpy(a.sun_path, socket_path.c_str(), sizeof(a.sun_path) - 1);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && SendAll(fd, command + "\n")) {
    shutdown(fd, SHUT_WR);
    char buf[65536];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

std::string HaproxyProcess::Binary() {
  const char* env = std::getenv("BERTH_HAPROXY_BINARY");
  return env && *env ? env : "/usr/sbin/haproxy";
}

bool HaproxyProcess::Start(const std::string& admin_socket, std::string* error) {
  std::string binary = Binary();
  if (access(binary.c_str(), X_OK) != 0) {
    *error = binary + " is not there: install Debian's haproxy (.ci/setup --tests)";
    return false;
  }
  pid_t parent = getpid();
  pid_ = fork();
  if (pid_ == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    int log = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    dup2(log, 1);
    dup2(log, 2);
    execl(binary.c_str(), binary.c_str(), "-W", "-f", config_.c_str(), "-S", master_socket_.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (UnixCommand(admin_socket, "show info").find("Pid:") != std::string::npos) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *error = "haproxy exited: " + log();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  *error = "haproxy's admin socket did not answer within 20 s: " + log();
  return false;
}

HaproxyProcess::~HaproxyProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

std::string HaproxyProcess::MasterCommand(const std::string& command) const {
  return UnixCommand(master_socket_, command);
}

void HaproxyProcess::SignalReload() const {
  if (pid_ > 0) kill(pid_, SIGUSR2);
}

std::string HaproxyProcess::log() const {
  std::ifstream in(log_);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace berth::testing
