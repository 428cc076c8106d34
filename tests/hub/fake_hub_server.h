// The fake Hub (tests/fake_hub/fake_hub.py) as a test fixture: started on loopback with its
// test repos, faults set and the request log read through its control API.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/systemd_sandbox.h"

namespace berth::testing {

class FakeHubServer {
 public:
  /// Builds the repos (big file `big_size` bytes) in `dir` and starts the hub with `args`.
  bool Start(const std::string& dir, uint64_t big_size, const std::vector<std::string>& args,
             std::string* error) {
    std::string src = BERTH_SOURCE_DIR;
    CommandResult r = RunCommand({"/usr/bin/python3", src + "/tests/fake_hub/make_test_repos.py",
                                  dir + "/repos", "--big-size", std::to_string(big_size)});
    if (!r.ok()) {
      *error = r.output + r.error;
      return false;
    }
    int out[2];
    if (::pipe(out) != 0) return false;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      std::vector<std::string> argv = {"/usr/bin/python3",
                                       src + "/tests/fake_hub/fake_hub.py",
                                       "--repos",
                                       dir + "/repos",
                                       "--log",
                                       dir + "/hub.log"};
      argv.insert(argv.end(), args.begin(), args.end());
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      ::execv(cargv[0], cargv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    FILE* f = ::fdopen(out[0], "r");
    char line[512] = {};
    bool got = std::fgets(line, sizeof line, f) != nullptr;
    std::fclose(f);
    if (!got) {
      *error = "the fake hub did not start";
      return false;
    }
    auto j = nlohmann::json::parse(line);
    api_ = j.at("api").get<std::string>();
    cdn_ = j.at("cdn").get<std::string>();
    return true;
  }
  ~FakeHubServer() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    // Bounded: a hub that does not exit within 10 s is killed (and the test run goes on).
    for (int i = 0; i < 1000; ++i) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      ::usleep(10'000);
    }
    std::fprintf(stderr, "fake hub %d did not exit 10 s after SIGTERM: killed\n", pid_);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  const std::string& api() const { return api_; }
  const std::string& cdn() const { return cdn_; }

  /// POST/GET/DELETE on the control API; returns the body.
  std::string Control(const std::string& method, const std::string& path,
                      const std::string& body = "") const {
    std::string py =
        "import sys,urllib.request as u\n"
        "r=u.Request(sys.argv[1],data=(sys.argv[3].encode() if sys.argv[3] else None),"
        "method=sys.argv[2],headers={'Content-Type':'application/json'})\n"
        "sys.stdout.write(u.urlopen(r,timeout=130).read().decode())\n";
    CommandResult r = RunCommand({"/usr/bin/python3", "-c", py, api_ + path, method, body});
    return r.output;
  }
  void Reset() const { Control("POST", "/_fake/reset"); }
  void Fault(const std::string& json) const { Control("POST", "/_fake/faults", json); }
  /// The request log once no request is being answered (waiting up to `wait_s` for that).
  nlohmann::json Log(int wait_s = 2) const {
    return nlohmann::json::parse(Control("GET", "/_fake/log?wait=" + std::to_string(wait_s)));
  }
  nlohmann::json Info() const { return nlohmann::json::parse(Control("GET", "/_fake/info")); }
  /// Bytes the CDN sent since the last Reset, once every request ended (up to `wait_s`).
  uint64_t CdnBytes(int wait_s = 2) const {
    uint64_t n = 0;
    for (const auto& e : Log(wait_s))
      if (e.value("port", "") == "cdn") n += e.value("bytes_sent", uint64_t{0});
    return n;
  }

 private:
  pid_t pid_ = -1;
  std::string api_, cdn_;
};

}  // namespace berth::testing
