// What the front tests run against: a real HAProxy (Debian's, /usr/sbin/haproxy) in
// master-worker mode owned by the test, tiny HTTP model servers on loopback, and a client that
// tells a refused or reset connection from an answer.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace berth::testing {

/// A loopback port nobody listened on a moment ago.
int FreePort();

/// An HTTP/1.1 server on 127.0.0.1 answering one request per connection (Connection: close):
///   GET|POST any path      200, body "NAME METHOD BODY_BYTES\n"
///   GET /stream?n=K        200, chunked: K chunks "NAME tok I\n", one every 100 ms
/// It counts the requests it answered.
class TinyHttpServer {
 public:
  TinyHttpServer(std::string name, int port) : name_(std::move(name)), port_(port) {}
  ~TinyHttpServer() { Stop(); }
  TinyHttpServer(const TinyHttpServer&) = delete;
  TinyHttpServer& operator=(const TinyHttpServer&) = delete;

  /// Listens and serves from a thread; false when the port cannot be bound.
  bool Start();
  /// Stops listening and waits for the requests in flight.
  void Stop();
  int port() const { return port_; }
  int answered() const { return answered_; }

 private:
  void Serve(int fd);

  std::string name_;
  int port_;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> answered_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> workers_;
};

struct HttpAnswer {
  enum class Outcome { kAnswered, kRefused, kReset, kTimeout, kError };
  Outcome outcome = Outcome::kError;
  int status = 0;
  std::string head;  // the status line and headers, lower-cased
  std::string body;  // as sent (chunked encoding kept)
  std::string error;
  bool answered() const { return outcome == Outcome::kAnswered; }
};

/// `request` (the whole HTTP/1.1 request, as written) to 127.0.0.1:`port`, read to the end.
HttpAnswer HttpSend(int port, const std::string& request, int timeout_ms = 60000);

/// One request to 127.0.0.1:`port` with Connection: close, read to the end.
HttpAnswer HttpCall(int port, const std::string& method, const std::string& path,
                    const std::string& body = "", int timeout_ms = 60000);

/// Debian's haproxy run by the test: `haproxy -W -f CONFIG -S MASTER_SOCKET` in the foreground,
/// its output in DIR/haproxy.log. Killed by the destructor.
class HaproxyProcess {
 public:
  /// $BERTH_HAPROXY_BINARY, else /usr/sbin/haproxy.
  static std::string Binary();
  HaproxyProcess(std::string config, std::string master_socket, std::string log)
      : config_(std::move(config)),
        master_socket_(std::move(master_socket)),
        log_(std::move(log)) {}
  ~HaproxyProcess();
  HaproxyProcess(const HaproxyProcess&) = delete;
  HaproxyProcess& operator=(const HaproxyProcess&) = delete;

  /// Starts it and waits (up to 20 s) until `admin_socket` answers; false and `error` else.
  bool Start(const std::string& admin_socket, std::string* error);
  /// `reload` on the master CLI; its answer (2.6 answers nothing).
  std::string MasterCommand(const std::string& command) const;
  /// SIGUSR2 to the master: the reload systemd's ExecReload sends.
  void SignalReload() const;
  pid_t pid() const { return pid_; }
  std::string log() const;

 private:
  std::string config_;
  std::string master_socket_;
  std::string log_;
  pid_t pid_ = -1;
};

/// One command on a unix stream socket, the whole answer ("" when it cannot connect).
std::string UnixCommand(const std::string& socket, const std::string& command);

}  // namespace berth::testing
