#include "providers/health/health_probe.h"
#include "providers/health/smoke_client.h"
#include "providers/health/standby_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/untrusted_text.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

/// A socket on 127.0.0.1 with a kernel-chosen port; listening or merely bound.
int LoopbackSocket(bool listening, int* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  if (listening && listen(fd, 16) != 0) return -1;
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

/// A one-thread HTTP/1.1 server on loopback answering canned responses by path.
class CannedHttpServer {
 public:
  struct Response {
    int status = 200;
    std::string body;
    bool hang = false;  // accept, read the request, never answer
  };

  explicit CannedHttpServer(std::map<std::string, Response> routes) : routes_(std::move(routes)) {
    listen_fd_ = LoopbackSocket(/*listening=*/true, &port_);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CannedHttpServer() {
    stop_ = true;
    thread_.join();
    for (int fd : hung_) close(fd);
    close(listen_fd_);
  }

  int port() const { return port_; }
  std::vector<std::string> paths() const {
    std::lock_guard<std::mutex> lock(mu_);
    return paths_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      std::string request;
      char buf[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
      }
      size_t sp1 = request.find(' ');
      size_t sp2 = request.find(' ', sp1 + 1);
      std::string path = sp2 == std::string::npos ? "" : request.substr(sp1 + 1, sp2 - sp1 - 1);
      {
        std::lock_guard<std::mutex> lock(mu_);
        paths_.push_back(path);
      }
      auto it = routes_.find(path);
      Response r = it == routes_.end() ? Response{404, "{\"error\":\"not found\"}"} : it->second;
      if (r.hang) {
        hung_.push_back(fd);
        continue;
      }
      std::string answer = "HTTP/1.1 " + std::to_string(r.status) +
                           " Canned\r\nContent-Type: application/json\r\nContent-Length: " +
                           std::to_string(r.body.size()) + "\r\nConnection: close\r\n\r\n" + r.body;
      for (size_t off = 0; off < answer.size();) {
        ssize_t n = write(fd, answer.data() + off, answer.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      close(fd);
    }
  }

  std::map<std::string, Response> routes_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<int> hung_;
  mutable std::mutex mu_;
  std::vector<std::string> paths_;
  std::thread thread_;
};

const char kModels[] =
    R"({"object":"list","data":[{"id":"kimi-k25","object":"model"},{"id":"lora-a"}]})";

TEST(CurlHealthProbe, AServerThatIsUpAndListsTheModelIsHealthy) {
  CannedHttpServer server({{"/health", {200, ""}}, {"/v1/models", {200, kModels}}});
  CurlHealthProbe probe;
  HealthResult r = probe.Probe("127.0.0.1", server.port(), "/health", "kimi-k25");
  EXPECT_TRUE(r.healthy) << r.detail;
  EXPECT_EQ(r.health_status, 200);
  EXPECT_TRUE(r.model_listed);
  EXPECT_EQ(r.detail, "");
  EXPECT_THAT(server.paths(), ElementsAre("/health", "/v1/models"));
}

TEST(CurlHealthProbe, AHealthPathWithoutLeadingSlashIsStillAPath) {
  CannedHttpServer server({{"/ready", {200, "ok"}}, {"/v1/models", {200, kModels}}});
  CurlHealthProbe probe;
  EXPECT_TRUE(probe.Probe("127.0.0.1", server.port(), "ready", "lora-a").healthy);
}

TEST(CurlHealthProbe, A503WhileLoadingIsUnhealthyAndTheModelListIsNotAsked) {
  CannedHttpServer server({{"/health", {503, ""}}, {"/v1/models", {200, kModels}}});
  CurlHealthProbe probe;
  HealthResult r = probe.Probe("127.0.0.1", server.port(), "/health", "kimi-k25");
  EXPECT_FALSE(r.healthy);
  EXPECT_EQ(r.health_status, 503);
  EXPECT_FALSE(r.model_listed);
  EXPECT_THAT(r.detail, HasSubstr("GET http://127.0.0.1:" + std::to_string(server.port()) +
                                  "/health: HTTP 503"));
  EXPECT_THAT(r.detail, HasSubstr("not ready"));
  EXPECT_THAT(server.paths(), ElementsAre("/health"));
}

TEST(CurlHealthProbe, WithoutAServedNameTheHealthPathAloneDecidesAndNoModelListIsAsked) {
  // A state-only service: berth does not know what it serves, only where its health path is.
  CannedHttpServer server({{"/health", {200, ""}}, {"/v1/models", {404, ""}}});
  CurlHealthProbe probe;
  HealthResult r = probe.Probe("127.0.0.1", server.port(), "/health", "");
  EXPECT_TRUE(r.healthy) << r.detail;
  EXPECT_EQ(r.health_status, 200);
  EXPECT_THAT(server.paths(), ElementsAre("/health"));
}

TEST(CurlHealthProbe, AServerServingAnotherModelIsUnhealthyAndSaysWhatItServes) {
  CannedHttpServer server({{"/health", {200, ""}}, {"/v1/models", {200, kModels}}});
  CurlHealthProbe probe;
  HealthResult r = probe.Probe("127.0.0.1", server.port(), "/health", "minimax-m2");
  EXPECT_FALSE(r.healthy);
  EXPECT_EQ(r.health_status, 200);
  EXPECT_FALSE(r.model_listed);
  EXPECT_THAT(r.detail, HasSubstr("/v1/models lists [kimi-k25, lora-a], not 'minimax-m2'"));
}

TEST(CurlHealthProbe, NothingListeningIsConnectionRefused) {
  int port = 0;
  int fd = LoopbackSocket(/*listening=*/false, &port);  // holds the port, refuses connections
  ASSERT_GE(fd, 0);
  CurlHealthProbe probe;
  HealthResult r = probe.Probe("127.0.0.1", port, "/health", "kimi-k25");
  close(fd);
  EXPECT_FALSE(r.healthy);
  EXPECT_EQ(r.health_status, 0);
  EXPECT_THAT(r.detail, HasSubstr("GET http://127.0.0.1:" + std::to_string(port) +
                                  "/health: connection refused"));
}

TEST(CurlHealthProbe, AMalformedModelListIsUnhealthyAndQuoted) {
  CurlHealthProbe probe;
  {
    CannedHttpServer server({{"/health", {200, ""}}, {"/v1/models", {200, "{\"data\": [ oops"}}});
    HealthResult r = probe.Probe("127.0.0.1", server.port(), "/health", "kimi-k25");
    EXPECT_FALSE(r.healthy);
    EXPECT_EQ(r.health_status, 200);
    EXPECT_THAT(r.detail, HasSubstr("/v1/models: malformed model list (not JSON)"));
    EXPECT_THAT(r.detail, HasSubstr("oops"));
  }
  {
    CannedHttpServer server({{"/health", {200, ""}}, {"/v1/models", {200, R"({"models":[]})"}}});
    HealthResult r = probe.Probe("127.0.0.1", server.port(), "/health", "kimi-k25");
    EXPECT_THAT(r.detail, HasSubstr("malformed model list (no \"data\" array)"));
  }
  {
    CannedHttpServer server({{"/health", {200, ""}}, {"/v1/models", {200, R"({"data":[{}]})"}}});
    HealthResult r = probe.Probe("127.0.0.1", server.port(), "/health", "kimi-k25");
    EXPECT_THAT(r.detail, HasSubstr("without a string \"id\""));
  }
}

TEST(CurlHealthProbe, AModelListThatIsNotThereIsReportedWithItsStatus) {
  CannedHttpServer server({{"/health", {200, ""}}});
  CurlHealthProbe probe;
  HealthResult r = probe.Probe("127.0.0.1", server.port(), "/health", "kimi-k25");
  EXPECT_FALSE(r.healthy);
  EXPECT_THAT(r.detail, HasSubstr("/v1/models: HTTP 404"));
}

TEST(CurlHealthProbe, AServerThatNeverAnswersTimesOutWithinTheLimit) {
  CannedHttpServer server({{"/health", {200, "", /*hang=*/true}}});
  LoopbackLimits options;
  options.total_timeout_ms = 300;
  CurlHealthProbe probe(options);
  auto start = std::chrono::steady_clock::now();
  HealthResult r = probe.Probe("127.0.0.1", server.port(), "/health", "kimi-k25");
  auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(r.healthy);
  EXPECT_EQ(r.health_status, 0);
  EXPECT_THAT(r.detail, HasSubstr("/health: timed out"));
  // A hang guard, 100x the 300 ms limit: a busy machine cannot fail it, a probe that ignores
  // its limit (the server never answers) still does.
  EXPECT_LT(elapsed, std::chrono::seconds(30));
}

// The smoke gate's request (providers/health/smoke_client.h): text, or what came back instead.
TEST(CurlSmokeClient, ACompletionWithTextPassesAndAnEmptyOneSaysWhatCameBack) {
  CannedHttpServer server(
      {{"/v1/completions", {200, R"({"choices":[{"index":0,"text":" Hello!"}]})"}},
       {"/v1/chat/completions", {200, R"({"choices":[{"message":{"content":"  \n"}}]})"}}});
  CurlSmokeClient client;
  SmokeRequest req;
  req.model = "m";
  req.prompt = "Say hello.";
  SmokeResult ok = client.Send("127.0.0.1", server.port(), req);
  EXPECT_TRUE(ok.ok) << ok.detail;
  EXPECT_EQ(ok.text, " Hello!");
  req.api = "chat";
  SmokeResult empty = client.Send("127.0.0.1", server.port(), req);
  EXPECT_FALSE(empty.ok);
  EXPECT_EQ(empty.http_status, 200);
  EXPECT_THAT(empty.detail, HasSubstr("/v1/chat/completions: HTTP 200 with empty text"));
}

TEST(CurlSmokeClient, AnErrorStatusOrAMalformedAnswerFailsWithTheBody) {
  CannedHttpServer server({{"/v1/completions", {500, R"({"message":"CUDA out of memory"})"}}});
  CurlSmokeClient client;
  SmokeResult r = client.Send("127.0.0.1", server.port(), SmokeRequest{});
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.detail,
              HasSubstr("HTTP 500 (expected 200): '{\"message\":\"CUDA out of memory\"}'"));
  std::string text, error;
  EXPECT_FALSE(SmokeAnswerText("not json", "completions", &text, &error));
  EXPECT_EQ(error, "not JSON");
  EXPECT_FALSE(SmokeAnswerText(R"({"choices":[]})", "completions", &text, &error));
  EXPECT_FALSE(SmokeAnswerText(R"({"choices":[{"text":7}]})", "completions", &text, &error));
  EXPECT_EQ(error, "choices[0].text is not a string");
}

// A server's answer is text berth did not write: the detail that reaches the journal, state.json
// and the terminal is one line, cut on a character boundary, its controls and stray bytes \xNN.
TEST(CurlSmokeClient, WhatAServerSaysIsCutOnACharacterAndShownEscaped) {
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "\xe6\x97\xa5";  // 日, three bytes each
  CannedHttpServer server(
      {{"/v1/completions",
        {500,
         "bad \xff byte\r\n\x1b[2J\x1b]0;owned\x07 \x9b"
         "31m"}},
       {"/v1/chat/completions",
        {200, "{\"choices\":[{\"message\":{\"content\":\"x" + long_text + "\\u001b[2J\"}}]}"}}});
  CurlSmokeClient client;
  SmokeResult r = client.Send("127.0.0.1", server.port(), SmokeRequest{});
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.detail, HasSubstr("HTTP 500 (expected 200): 'bad \\xff byte\\x0d\\x0a\\x1b[2J"
                                  "\\x1b]0;owned\\x07 \\x9b31m'"));
  EXPECT_TRUE(IsUtf8(r.detail));
  SmokeRequest chat;
  chat.api = "chat";
  SmokeResult ok = client.Send("127.0.0.1", server.port(), chat);
  ASSERT_TRUE(ok.ok) << ok.detail;
  // 1 + 66 characters of three bytes fit in 200 bytes; the 67th would be cut in two.
  EXPECT_EQ(ok.text, "x" + long_text.substr(0, 66 * 3) + "...");
  EXPECT_TRUE(IsUtf8(ok.text));
}

TEST(CurlSmokeClient, NothingListeningIsRefusedNotAnError) {
  int port = 0;
  int fd = LoopbackSocket(/*listening=*/false, &port);
  CurlSmokeClient client;
  SmokeResult r = client.Send("127.0.0.1", port, SmokeRequest{});
  close(fd);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.detail, HasSubstr("connection refused"));
}

// vLLM's sleep routes (standby: sleep): what a server answers is untrusted. A sleep or wake is
// Ok only on 200; a 404 says the routes are not served (dev mode off); /is_sleeping must be a
// JSON object with a boolean, anything else is refused quoted and escaped, and a huge answer is
// cut off, never read whole.
TEST(CurlStandbyClient, SleepWakeAndIsSleepingTakeOnlyWhatVllmAnswers) {
  CannedHttpServer up({{"/sleep?level=1", {200, ""}},
                       {"/wake_up", {200, ""}},
                       {"/is_sleeping", {200, R"({"is_sleeping": true})"}}});
  CurlStandbyClient c;
  EXPECT_TRUE(c.Sleep("127.0.0.1", up.port(), 1, 5000).ok());
  EXPECT_TRUE(c.WakeUp("127.0.0.1", up.port(), 5000).ok());
  Result<bool> asleep = c.IsSleeping("127.0.0.1", up.port(), 5000);
  ASSERT_TRUE(asleep.ok()) << asleep.status().message();
  EXPECT_TRUE(*asleep);
  EXPECT_THAT(up.paths(), ElementsAre("/sleep?level=1", "/wake_up", "/is_sleeping"));

  CannedHttpServer off({});  // no dev mode: every route 404
  Status s = c.Sleep("127.0.0.1", off.port(), 1, 5000);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("HTTP 404"));
  EXPECT_THAT(s.message(), HasSubstr("VLLM_SERVER_DEV_MODE=1"));

  CannedHttpServer failing({{"/wake_up", {500, "engine dead\x1b[2J\xff"}}});
  s = c.WakeUp("127.0.0.1", failing.port(), 5000);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("HTTP 500 ('engine dead\\x1b[2J\\xff')"));

  for (const std::string& body :
       {std::string(R"({"is_sleeping": "yes"})"), std::string("true"), std::string("{}"),
        std::string("not json \xff"), std::string(R"([{"is_sleeping": true}])")}) {
    CannedHttpServer odd({{"/is_sleeping", {200, body}}});
    Result<bool> r = c.IsSleeping("127.0.0.1", odd.port(), 5000);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_THAT(r.status().message(), HasSubstr("GET http://127.0.0.1:")) << body;
    EXPECT_EQ(r.status().message().find('\xff'), std::string::npos) << "escaped: " << body;
  }
  CannedHttpServer huge({{"/is_sleeping", {200, std::string(1 << 20, ' ')}}});
  Result<bool> r = c.IsSleeping("127.0.0.1", huge.port(), 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("longer than 65536 bytes"));

  int port = 0;
  int fd = LoopbackSocket(/*listening=*/false, &port);
  r = c.IsSleeping("127.0.0.1", port, 5000);
  close(fd);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("connection refused"));
}

}  // namespace
}  // namespace berth
