#include "tests/support/etcd_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <vector>

namespace berth::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string Binary(const EtcdServer::Options& options) {
  if (!options.binary.empty()) return options.binary;
  std::string from_env = GetEnv("BERTH_ETCD_BINARY");
  return from_env.empty() ? "/usr/bin/etcd" : from_env;
}

std::string Tail(const std::string& text, size_t max_bytes) {
  return text.size() <= max_bytes ? text : "..." + text.substr(text.size() - max_bytes);
}

/// A port on 127.0.0.1 that was free a moment ago.
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

/// One HTTP/1.0 exchange with 127.0.0.1:`port`: the status (0 when none) and the body.
int Exchange(int port, const std::string& method, const std::string& path, const std::string& body,
             std::string* answer) {
  answer->clear();
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return 0;
  }
  std::string request =
      method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n" +
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return 0;
  }
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;)
    response.append(buf, static_cast<size_t>(n));
  close(fd);
  // "HTTP/1.x NNN ..."
  if (response.size() < 12 || response.compare(0, 5, "HTTP/") != 0) return 0;
  int status = std::atoi(response.c_str() + 9);
  size_t head_end = response.find("\r\n\r\n");
  if (head_end != std::string::npos) *answer = response.substr(head_end + 4);
  return status;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Runs argv (searched in PATH), stdin /dev/null, stdout and stderr to `log_path`; its exit
/// status, -1 when it could not run or was killed.
int RunQuietly(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int null = open("/dev/null", O_RDONLY);
    if (fd < 0 || null < 0) _exit(127);
    dup2(null, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    execvp(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace

bool EtcdServer::Available(std::string* why) {
  std::string binary = Binary(Options{});
  if (access(binary.c_str(), X_OK) != 0) {
    *why = binary + " is not there or not executable (Debian package etcd-server)";
    return false;
  }
  return true;
}

bool EtcdServer::MissingAllowed() { return GetEnv("BERTH_ALLOW_NO_ETCD") == "1"; }

EtcdServer::EtcdServer(Options options) : options_(std::move(options)) {}

EtcdServer::~EtcdServer() {
  if (running()) Kill();
  if (::testing::Test::HasFailure() && !dir_.empty()) {
    std::cerr << "etcd log (" << dir_ << "/etcd.log):\n" << Tail(log(), 8000) << "\n";
  }
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

std::string EtcdServer::client_url() const {
  return (options_.tls ? "https" : "http") + std::string("://127.0.0.1:") +
         std::to_string(client_port_);
}

std::string EtcdServer::socket_path() const {
  return dir_ + "/etcd.sock:" + std::to_string(client_port_);
}

std::string EtcdServer::log() const { return ReadAll(dir_ + "/etcd.log"); }

void EtcdServer::PickPorts() {
  client_port_ = FreePort();
  do {
    peer_port_ = FreePort();
  } while (peer_port_ == client_port_);
  do {
    metrics_port_ = FreePort();
  } while (metrics_port_ == client_port_ || metrics_port_ == peer_port_);
}

bool EtcdServer::MakeCertificates(std::string* error) {
  const std::string ec = "ec_paramgen_curve:prime256v1";
  auto make = [&](const std::string& name, const std::string& subject,
                  std::vector<std::string> extra) {
    std::vector<std::string> args = {"openssl", "req",
                                     "-x509",   "-newkey",
                                     "ec",      "-pkeyopt",
                                     ec,        "-nodes",
                                     "-days",   "2",
                                     "-subj",   subject,
                                     "-keyout", dir_ + "/" + name + ".key",
                                     "-out",    dir_ + "/" + name + ".pem"};
    args.insert(args.end(), extra.begin(), extra.end());
    int status = RunQuietly(args, dir_ + "/openssl.log");
    if (status != 0) {
      *error =
          "openssl req for " + name + " failed (status " + std::to_string(status) +
          "; is the openssl command installed?): " + Tail(ReadAll(dir_ + "/openssl.log"), 2000);
      return false;
    }
    return true;
  };
  const std::string ca = dir_ + "/ca.pem", ca_key = dir_ + "/ca.key";
  return make("ca", "/CN=berth-test-ca", {}) &&
         make("server", "/CN=127.0.0.1",
              {"-CA", ca, "-CAkey", ca_key, "-addext", "subjectAltName=IP:127.0.0.1", "-addext",
               "extendedKeyUsage=serverAuth,clientAuth"}) &&
         make("client", "/CN=root",
              {"-CA", ca, "-CAkey", ca_key, "-addext", "extendedKeyUsage=clientAuth"});
}

bool EtcdServer::Start(std::string* error) {
  if (running()) {
    *error = "etcd is running already";
    return false;
  }
  bool first = dir_.empty();
  if (first) {
    char tmpl[] = "/tmp/berth-etcd-XXXXXX";  // short: a unix socket path has 107 bytes at most
    if (!mkdtemp(tmpl)) {
      *error = std::string("mkdtemp: ") + std::strerror(errno);
      return false;
    }
    dir_ = tmpl;
    PickPorts();
    if (options_.tls && !MakeCertificates(error)) return false;
  }
  for (int attempt = 1;; ++attempt) {
    bool port_taken = false;
    if (StartOnce(error, &port_taken)) return true;
    if (!first || !port_taken || attempt == 5) return false;
    std::error_code ec;
    fs::remove_all(dir_ + "/data", ec);
    PickPorts();  // another process took a port between FreePort() and etcd's bind
  }
}

bool EtcdServer::StartOnce(std::string* error, bool* port_taken) {
  std::string client = client_url();
  std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
  std::string listen_client = client;
  if (options_.unix_socket) {
    // etcd 3.4 makes the socket file "NAME:PORT" in its working directory.
    listen_client += ",unix://etcd.sock:" + std::to_string(client_port_);
  }
  std::vector<std::string> args = {
      Binary(options_),
      "--name=berth-test",
      "--data-dir=" + dir_ + "/data",
      "--listen-client-urls=" + listen_client,
      "--advertise-client-urls=" + client,
      "--listen-peer-urls=" + peer,
      "--initial-advertise-peer-urls=" + peer,
      "--initial-cluster=berth-test=" + peer,
      "--initial-cluster-state=new",
      "--listen-metrics-urls=http://127.0.0.1:" + std::to_string(metrics_port_)};
  if (options_.tls) {
    for (std::string flag :
         {"--cert-file=" + dir_ + "/server.pem", "--key-file=" + dir_ + "/server.key",
          std::string("--client-cert-auth=true"), "--trusted-ca-file=" + dir_ + "/ca.pem"})
      args.push_back(flag);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string log_path = dir_ + "/etcd.log";
  size_t log_start = log().size();
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    *error = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    // Dies with the test process, whatever ends it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int null = open("/dev/null", O_RDONLY);
    if (fd < 0 || null < 0 || chdir(dir_.c_str()) != 0) _exit(127);
    dup2(null, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    setpgid(0, 0);
    execv(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      std::string output = log().substr(log_start);
      *port_taken = output.find("address already in use") != std::string::npos;
      *error = "etcd exited while starting (" +
               (WIFEXITED(status) ? "status " + std::to_string(WEXITSTATUS(status))
                                  : "signal " + std::to_string(WTERMSIG(status))) +
               "): " + Tail(output, 3000);
      return false;
    }
    std::string answer;
    if (Exchange(metrics_port_, "GET", "/health", "", &answer) == 200 &&
        answer.find("\"true\"") != std::string::npos &&
        (!options_.unix_socket || access(socket_path().c_str(), F_OK) == 0))
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling, with a deadline
  }
  Kill();
  *error =
      "etcd did not answer on " + client + " within 30 s: " + Tail(log().substr(log_start), 3000);
  return false;
}

void EtcdServer::Reap(int signal) {
  if (pid_ <= 0) return;
  kill(pid_, signal);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = 0;
}

bool EtcdServer::Stop() {
  if (pid_ <= 0) return true;
  kill(pid_, SIGTERM);
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = 0;
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling, with a deadline
  }
  Reap(SIGKILL);
  return false;
}

void EtcdServer::Kill() { Reap(SIGKILL); }

int EtcdServer::Post(const std::string& path, const std::string& body, std::string* answer) const {
  return Exchange(client_port_, "POST", path, body, answer);
}

bool EtcdServer::EnableAuth(const std::string& password, std::string* error) {
  std::string user = "{\"name\":\"root\",\"password\":\"" + password + "\"}";
  const std::pair<const char*, std::string> steps[] = {
      {"/v3/auth/user/add", user},
      {"/v3/auth/role/add", "{\"name\":\"root\"}"},
      {"/v3/auth/user/grant", "{\"user\":\"root\",\"role\":\"root\"}"},
      {"/v3/auth/enable", "{}"},
  };
  for (const auto& [path, body] : steps) {
    std::string answer;
    int status = Post(path, body, &answer);
    if (status != 200) {
      *error = std::string("POST ") + path + ": HTTP " + std::to_string(status) + ": " + answer;
      return false;
    }
  }
  return true;
}

}  // namespace berth::testing
