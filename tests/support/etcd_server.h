// A real etcd (Debian's etcd-server, /usr/bin/etcd) owned by a test: one member on loopback
// with a temp data dir, a free client port (and optionally a unix socket), a free peer port.
// Start() blocks until it answers; Stop() and Kill() end it, and Start() brings it back on the
// same data dir and ports (fleet tests stop etcd mid-rollout). The destructor kills it and
// removes the dir; its output goes to a log file, printed when the test failed.
#pragma once

#include <sys/types.h>

#include <string>

namespace berth::testing {

class EtcdServer {
 public:
  struct Options {
    /// Also listen on a unix socket (socket_path(), unix_endpoint()) (default off).
    bool unix_socket = false;
    /// Serve clients over https only, with a certificate of a test CA (made with the openssl
    /// command) and client certificates required: ca_file(), client_cert_file(),
    /// client_key_file() (default off).
    bool tls = false;
    /// The etcd binary: $BERTH_ETCD_BINARY, else /usr/bin/etcd (the default "").
    std::string binary;
  };

  /// Whether an etcd binary is there to run; if not, `why` says what is missing.
  static bool Available(std::string* why);
  /// True when BERTH_ALLOW_NO_ETCD=1: tests may skip instead of failing without etcd.
  static bool MissingAllowed();

  EtcdServer() : EtcdServer(Options{}) {}
  explicit EtcdServer(Options options);
  /// Kills etcd if running, prints the log when the current test failed, removes the dir.
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  /// Starts etcd and waits (up to 30 s) until /health says true. The first Start() makes the
  /// dir and picks the ports (again, if etcd lost a race for them); later ones reuse both.
  /// False and `error` (with the log's tail) on failure. etcd is killed when the thread that
  /// started it ends (PR_SET_PDEATHSIG), so start it from the test's own thread.
  bool Start(std::string* error);
  /// SIGTERM, then waits for it to exit (SIGKILL after 10 s). True when it exited by itself.
  bool Stop();
  /// SIGKILL, then waits for it.
  void Kill();
  bool running() const { return pid_ > 0; }

  /// "http://127.0.0.1:PORT" ("https://..." with Options::tls).
  std::string client_url() const;
  /// "unix://" + socket_path() (only with Options::unix_socket).
  std::string unix_endpoint() const { return "unix://" + socket_path(); }
  /// The socket file etcd makes in its working dir: DIR/etcd.sock:PORT.
  std::string socket_path() const;
  /// With Options::tls: the test CA, and a client certificate it signed and its key.
  std::string ca_file() const { return dir_ + "/ca.pem"; }
  std::string client_cert_file() const { return dir_ + "/client.pem"; }
  std::string client_key_file() const { return dir_ + "/client.key"; }
  /// What etcd wrote so far.
  std::string log() const;

  /// Adds user root with `password` and the root role, then `auth enable`, through the
  /// gateway. False and `error` on failure.
  bool EnableAuth(const std::string& password, std::string* error);

  /// POSTs `body` to `path` on the client port (a plain HTTP/1.0 exchange, no auth, not with
  /// Options::tls): the status (0 when no answer) and `*answer` the body.
  int Post(const std::string& path, const std::string& body, std::string* answer) const;

 private:
  bool StartOnce(std::string* error, bool* port_taken);
  bool MakeCertificates(std::string* error);
  void PickPorts();
  void Reap(int signal);

  Options options_;
  std::string dir_;
  int client_port_ = 0;
  int peer_port_ = 0;
  int metrics_port_ = 0;  // plain http: /health, whatever the client side speaks
  pid_t pid_ = 0;
};

}  // namespace berth::testing

/// In a TEST body: fails the test when etcd is not installed, or skips it (printing why) when
/// BERTH_ALLOW_NO_ETCD=1.
#define BERTH_REQUIRE_ETCD()                                                                  \
  do {                                                                                        \
    std::string berth_etcd_why_;                                                              \
    if (!::berth::testing::EtcdServer::Available(&berth_etcd_why_)) {                         \
      if (::berth::testing::EtcdServer::MissingAllowed()) {                                   \
        GTEST_SKIP() << "no etcd here (BERTH_ALLOW_NO_ETCD=1): " << berth_etcd_why_;          \
      }                                                                                       \
      FAIL() << "no etcd here: " << berth_etcd_why_                                           \
             << " (install etcd-server, see .ci/setup, or set BERTH_ALLOW_NO_ETCD=1 to skip " \
                "these tests)";                                                               \
    }                                                                                         \
  } while (false)
