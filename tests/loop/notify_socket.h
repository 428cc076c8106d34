// A datagram socket standing in for systemd's notification socket: point $NOTIFY_SOCKET at
// path() and read what berth sends.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace berth::testing {

class NotifySocket {
 public:
  NotifySocket() {
    path_ = (std::filesystem::temp_directory_path() /
             ("berth-notify-" + std::to_string(::getpid()) + "-" + std::to_string(++count_)))
                .string();
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path_.c_str(), sizeof a.sun_path - 1);
    ::unlink(path_.c_str());
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  bool ok() const { return ok_; }
  const std::string& path() const { return path_; }

  /// The next datagram, or nullopt after `timeout`.
  std::optional<std::string> Next(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0) return std::nullopt;
    return std::string(buf, static_cast<size_t>(n));
  }
  /// Every datagram until none came for `quiet`.
  std::vector<std::string> Drain(std::chrono::milliseconds quiet = std::chrono::milliseconds(50)) {
    std::vector<std::string> out;
    while (auto m = Next(quiet)) out.push_back(*m);
    return out;
  }
  /// Datagrams until one contains `needle` (returned last), or all until `timeout`.
  std::vector<std::string> Until(const std::string& needle, std::chrono::milliseconds timeout) {
    std::vector<std::string> out;
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      auto m = Next(std::max(left, std::chrono::milliseconds(1)));
      if (!m) break;
      out.push_back(*m);
      if (m->find(needle) != std::string::npos) break;
    }
    return out;
  }

 private:
  static inline int count_ = 0;
  std::string path_;
  int fd_ = -1;
  bool ok_ = false;
};

}  // namespace berth::testing
