// The load generator against servers on loopback that answer canned bytes: what it counts, and
// what a broken or hostile server makes of a run (an error with a reason, never a crash or an
// unbounded buffer). Runs against the real fake vLLM are in tests/bench_cli (berth bench).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "providers/bench/load.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

/// Accepts connections on 127.0.0.1; the Nth connection gets answers[N] (after reading its
/// request), then is closed. Connections beyond the list are held open without an answer.
class CannedServer {
 public:
  static constexpr const char* kPause = "<pause>";
  /// keep_open: the connections that got their answer are held open instead of closed (a
  /// stream that never ends).
  explicit CannedServer(std::vector<std::string> answers, bool keep_open = false)
      : answers_(std::move(answers)), keep_open_(keep_open) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 64);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CannedServer() {
    stop_ = true;
    thread_.join();
    for (int fd : held_) close(fd);
    close(fd_);
  }
  int port() const { return port_; }
  int connections() const { return accepted_.load(); }

 private:
  static void ReadRequest(int fd) {
    std::string in;
    char buf[4096];
    size_t need = std::string::npos;
    while (need == std::string::npos || in.size() < need) {
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return;
      in.append(buf, static_cast<size_t>(n));
      size_t end = in.find("\r\n\r\n");
      if (end != std::string::npos && need == std::string::npos) {
        size_t cl = in.find("Content-Length: ");
        size_t length = cl == std::string::npos ? 0 : std::stoul(in.substr(cl + 16));
        need = end + 4 + length;
      }
    }
  }
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      size_t i = static_cast<size_t>(accepted_++);
      if (i >= answers_.size()) {
        held_.push_back(c);
        continue;
      }
      ReadRequest(c);
      // kPause in an answer: what came before it is sent, then the server waits 30 ms.
      std::string_view rest = answers_[i];
      while (true) {
        size_t pause = rest.find(kPause);
        std::string_view a = rest.substr(0, pause);
        for (size_t off = 0; off < a.size();) {
          ssize_t n = send(c, a.data() + off, a.size() - off, MSG_NOSIGNAL);
          if (n <= 0) break;
          off += static_cast<size_t>(n);
        }
        if (pause == std::string_view::npos) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        rest.remove_prefix(pause + std::string_view(kPause).size());
      }
      if (keep_open_)
        held_.push_back(c);
      else
        close(c);
    }
  }
  std::vector<std::string> answers_;
  bool keep_open_ = false;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::vector<int> held_;
  std::thread thread_;
};

/// Answers requests one connection at a time, keeping each connection alive for `per_connection`
/// answers (chunked, no "Connection: close"), then closing it while idle, as uvicorn closes a
/// connection idle for 5 s. Counts the connections and the requests.
class KeepAliveServer {
 public:
  KeepAliveServer(std::string chunked_body, int per_connection)
      : body_(std::move(chunked_body)), per_connection_(per_connection) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 64);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~KeepAliveServer() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }

 private:
  /// Reads one request (head and Content-Length body); false when the client went away.
  static bool ReadRequest(int fd) {
    std::string in;
    char buf[4096];
    size_t need = std::string::npos;
    while (need == std::string::npos || in.size() < need) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 2000) <= 0) return false;
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      in.append(buf, static_cast<size_t>(n));
      size_t end = in.find("\r\n\r\n");
      if (end != std::string::npos && need == std::string::npos) {
        size_t cl = in.find("Content-Length: ");
        need = end + 4 + (cl == std::string::npos ? 0 : std::stoul(in.substr(cl + 16)));
      }
    }
    return true;
  }
  void Serve() {
    std::string answer =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", body_.size());
    answer += size + body_ + "\r\n0\r\n\r\n";
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++connections_;
      for (int i = 0; i < per_connection_ && ReadRequest(c); ++i) {
        ++requests_;
        send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      }
      close(c);
    }
  }
  std::string body_;
  int per_connection_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0}, requests_{0};
  std::thread thread_;
};

std::string Sse(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + body;
}

std::string Chunk(const std::string& text) {
  return "data: {\"choices\":[{\"index\":0,\"text\":\"" + text + "\"}]}\n\n";
}

// Every test of RunLoad runs twice: reading with io_uring (where the kernel allows it) and with
// epoll.
bool g_io_uring = true;

class RunLoadReaders : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { g_io_uring = GetParam(); }
};

INSTANTIATE_TEST_SUITE_P(Reader, RunLoadReaders, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return std::string(p.param ? "IoUring" : "Epoll");
                         });

LoadSpec Spec(int port, int concurrency = 1) {
  LoadSpec s;
  s.io_uring = g_io_uring;
  s.port = port;
  s.model = "m";
  s.concurrency = concurrency;
  s.duration = 600ms;
  s.max_tokens = 8;
  return s;
}

TEST_P(RunLoadReaders, CountsUsageOfFinishedRequestsAndDeltasOfCancelledOnes) {
  // Two streams: the first connection finishes (3 deltas, usage says 5); the next two are held.
  CannedServer server({Sse(Chunk("aa") + Chunk("bb") + Chunk("cc") +
                           "data: {\"choices\":[],\"usage\":{\"completion_tokens\":5}}\n\n"
                           "data: [DONE]\n\n")});
  auto r = RunLoad(Spec(server.port(), 2));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 1u);
  EXPECT_EQ(r->errors, 0u);
  EXPECT_EQ(r->cancelled, 2u);  // the second stream's and the replacement request
  EXPECT_EQ(r->output_tokens, 5u);
  EXPECT_EQ(r->first_error, "");
  EXPECT_NEAR(r->seconds, 0.6, 1e-9);
  EXPECT_NEAR(r->output_tps, 5 / 0.6, 1e-9);
  EXPECT_EQ(server.connections(), 3);
}

// A server's usage is believed only as far as what arrived bears it out: at most the bytes of
// text that came and the request's max_tokens; at least the content chunks that came.
TEST_P(RunLoadReaders, CountsWhatArrivedNotWhatTheServerClaims) {
  CannedServer server(
      {Sse(Chunk("ab") + Chunk("cd") + Chunk("ef") +
           "data: {\"choices\":[],\"usage\":{\"completion_tokens\":18446744073709551615}}\n\n"
           "data: [DONE]\n\n"),
       Sse(Chunk("abcdefghijklmnop") +
           "data: {\"choices\":[],\"usage\":{\"completion_tokens\":1000000}}\n\n"
           "data: [DONE]\n\n"),
       Sse(Chunk("a") + Chunk("b") + Chunk("c") +
           "data: {\"choices\":[],\"usage\":{\"completion_tokens\":0}}\n\n"
           "data: [DONE]\n\n")});
  auto r = RunLoad(Spec(server.port()));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 3u);
  // 6 bytes of text (usage 2^64-1), then max_tokens 8 (usage 1e6, 16 bytes), then 3 chunks
  // (usage 0).
  EXPECT_EQ(r->output_tokens, 6u + 8u + 3u);
}

// llama.cpp's last chunk carries its own account (timings): reported beside berth's count, per
// finished request, and not believed beyond the request's max_tokens (8 here) or a day of
// decode; berth's own count does not change with it.
TEST_P(RunLoadReaders, ReportsTheServersOwnAccountBesideItsCount) {
  auto last = [](const std::string& timings) {
    return "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}],"
           "\"usage\":{\"completion_tokens\":3},\"timings\":" +
           timings + "}\n\ndata: [DONE]\n\n";
  };
  CannedServer server({Sse(Chunk("ab") + Chunk("cd") + Chunk("ef") +
                           last(R"({"predicted_n":3,"predicted_ms":20.5})")),
                       Sse(Chunk("ab") + Chunk("cd") + Chunk("ef") +
                           last(R"({"predicted_n":3,"predicted_ms":30.5})")),
                       Sse(Chunk("ab") + Chunk("cd") + Chunk("ef") +
                           last(R"({"predicted_n":9,"predicted_ms":1.0})")),
                       Sse(Chunk("ab") + Chunk("cd") + Chunk("ef") +
                           last(R"({"predicted_n":3,"predicted_ms":1e300})"))});
  LoadSpec spec = Spec(server.port());
  spec.num_prompts = 4;
  auto r = RunLoad(spec);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 4u);
  EXPECT_EQ(r->output_tokens, 12u);
  EXPECT_EQ(r->server_requests, 2u);
  EXPECT_EQ(r->server_output_tokens, 6u);
  EXPECT_DOUBLE_EQ(r->server_decode_ms, 51.0);
  EXPECT_DOUBLE_EQ(r->server_tpot_mean_ms, (20.5 / 2 + 30.5 / 2) / 2);
}

TEST_P(RunLoadReaders, AChunkOfAThousandChoicesIsOneToken) {
  std::string choices;
  for (int i = 0; i < 1000; ++i)
    choices += std::string(i ? "," : "") + "{\"index\":0,\"text\":\"x\"}";
  CannedServer server({Sse("data: {\"choices\":[" + choices + "]}\n\ndata: [DONE]\n\n")});
  auto r = RunLoad(Spec(server.port()));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 1u);
  EXPECT_EQ(r->output_tokens, 1u);
}

TEST_P(RunLoadReaders, AStreamThatNeverEndsIsCreditedAtMostItsMaxTokens) {
  std::string many;
  for (int i = 0; i < 100; ++i) many += Chunk("tok");
  // 100 chunks, no [DONE], and the connection is held: the request is cancelled at the end.
  CannedServer server({Sse(many)}, /*keep_open=*/true);
  auto r = RunLoad(Spec(server.port()));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 0u);
  EXPECT_EQ(r->cancelled, 1u);
  EXPECT_EQ(r->output_tokens, 8u);  // its max_tokens
}

TEST_P(RunLoadReaders, CountsContentDeltasWithoutUsage) {
  CannedServer server({Sse(Chunk("a") + Chunk("b") + "data: [DONE]\n\n")});
  auto r = RunLoad(Spec(server.port()));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->requests, 1u);
  EXPECT_EQ(r->output_tokens, 2u);
  EXPECT_GE(r->itl_p50_ms, 0.0);
}

TEST_P(RunLoadReaders, AnErrorStatusIsCountedWithTheServersMessage) {
  std::string body = R"({"object":"error","message":"The model `m` does not exist."})";
  CannedServer server({"HTTP/1.1 404 Not Found\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\nConnection: close\r\n\r\n" + body});
  auto r = RunLoad(Spec(server.port()));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->errors, 1u);
  EXPECT_EQ(r->requests, 0u);
  EXPECT_THAT(r->first_error,
              HasSubstr("/v1/completions: HTTP 404: The model `m` does not exist."));
}

TEST_P(RunLoadReaders, StopsAfterMaxErrors) {
  std::string answer = "HTTP/1.1 500 Oops\r\nContent-Length: 4\r\nConnection: close\r\n\r\nboom";
  CannedServer server(std::vector<std::string>(50, answer));
  LoadSpec spec = Spec(server.port());
  spec.max_errors = 3;
  spec.duration = 60s;
  auto r = RunLoad(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->errors, 3u);
  EXPECT_THAT(r->first_error, HasSubstr("HTTP 500: 'boom'"));
  EXPECT_LT(r->seconds, 60.0);
}

TEST_P(RunLoadReaders, MalformedAndBrokenStreamsAreErrors) {
  CannedServer server({Sse("data: {not json\n\n"),
                       Sse(Chunk("a") + "data: {\"error\":{\"message\":\"engine died\"}}\n\n"),
                       Sse(Chunk("a") + Chunk("b")),  // closed without [DONE]
                       Sse("data: " + std::string(5000, 'x'))});
  LoadSpec spec = Spec(server.port());
  spec.max_event_bytes = 1024;
  auto r = RunLoad(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->errors, 4u);
  EXPECT_EQ(r->requests, 0u);
  EXPECT_EQ(r->output_tokens, 0u);
  EXPECT_THAT(r->first_error, HasSubstr("not a JSON object: '{not json'"));
}

TEST_P(RunLoadReaders, AHostileServerCannotGrowAnUnboundedLine) {
  // 64 MiB without a line end: the reader gives up at its limit, the run goes on.
  CannedServer server({Sse("data: " + std::string(size_t{64} << 20, 'y'))});
  LoadSpec spec = Spec(server.port());
  spec.max_event_bytes = 4096;
  auto r = RunLoad(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->errors, 1u);
  EXPECT_THAT(r->first_error, HasSubstr("longer than 4096 bytes"));
}

TEST_P(RunLoadReaders, NothingListeningIsAnErrorSayingSo) {
  // A bound socket that does not listen: connections to its port are refused.
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  LoadSpec spec = Spec(ntohs(addr.sin_port));
  spec.max_errors = 2;
  spec.duration = 60s;
  auto r = RunLoad(spec);
  close(fd);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->errors, 2u);
  EXPECT_THAT(r->first_error, HasSubstr("connection refused"));
}

TEST_P(RunLoadReaders, StopEndsTheRunEarly) {
  CannedServer server({});
  std::atomic<bool> stop{true};
  LoadSpec spec = Spec(server.port());
  spec.duration = 60s;
  auto r = RunLoad(spec, &stop);
  ASSERT_TRUE(r.ok());
  EXPECT_LT(r->seconds, 60.0);
  EXPECT_EQ(r->cancelled, 1u);
}

// A fixed number of requests (--num-prompts): the run ends when the last one has, whatever the
// duration, and nothing is cut.
TEST_P(RunLoadReaders, AFixedNumberOfRequestsEndsWhenTheLastHas) {
  std::string answer = Sse(Chunk("a") + Chunk("b") + "data: [DONE]\n\n");
  CannedServer server({answer, answer, answer});
  LoadSpec spec = Spec(server.port(), 2);
  spec.duration = 600s;  // would hold the test for ten minutes if it counted
  spec.num_prompts = 3;
  auto r = RunLoad(spec);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 3u);
  EXPECT_EQ(r->cancelled, 0u);
  EXPECT_EQ(r->output_tokens, 6u);
  EXPECT_EQ(server.connections(), 3);
  EXPECT_GT(r->seconds, 0);
  EXPECT_NEAR(r->request_tps, 3 / r->seconds, 1e-9);
}

// At a request rate, a fixed number of requests all go out (the schedule ends at n / rate).
TEST_P(RunLoadReaders, ARequestRateSendsEveryRequest) {
  std::string answer = Sse(Chunk("a") + "data: [DONE]\n\n");
  CannedServer server({answer, answer, answer, answer, answer});
  LoadSpec spec = Spec(server.port(), 2);
  spec.num_prompts = 5;
  spec.request_rate = 200;
  spec.seed = 3;
  auto r = RunLoad(spec);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 5u);
  EXPECT_EQ(server.connections(), 5);
}

// The warm-up's requests run first and reach no figure.
TEST_P(RunLoadReaders, WarmUpRequestsAreLeftOutOfTheFigures) {
  std::string warm = Sse(Chunk("w") + Chunk("w") + Chunk("w") + "data: [DONE]\n\n");
  std::string measured = Sse(Chunk("m") + "data: [DONE]\n\n");
  CannedServer server({warm, warm, measured, measured});
  LoadSpec spec = Spec(server.port(), 2);
  spec.warmup_requests = 2;
  spec.num_prompts = 2;
  auto r = RunLoad(spec);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->warmup_requests, 2u);
  EXPECT_EQ(r->requests, 2u);
  EXPECT_EQ(r->output_tokens, 2u);  // one each; the warm-up's three are not counted
  EXPECT_EQ(server.connections(), 4);
}

// The times the generator records reach the figures: one request of four tokens, each chunk
// 30 ms after the last. The definitions hold exactly between the figures (TPOT is
// (E2E - TTFT) / 3, the mean ITL a third of the same); the last chunk cannot come before the
// server sent it, 90 ms after it read the request, so E2E is at least that. A gap between two
// chunks has no lower bound: a reader descheduled on a busy machine records a chunk late and
// the next gap short (CI saw E2E - TTFT = 86.6 ms). No bound on how fast anything is.
TEST_P(RunLoadReaders, TheRecordedTimesReachTheFigures) {
  std::string p = CannedServer::kPause;
  CannedServer server(
      {Sse(Chunk("a") + p + Chunk("b") + p + Chunk("c") + p + Chunk("d") + "data: [DONE]\n\n")});
  LoadSpec spec = Spec(server.port(), 1);
  spec.num_prompts = 1;
  auto r = RunLoad(spec);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->requests, 1u);
  EXPECT_EQ(r->output_tokens, 4u);
  EXPECT_GT(r->ttft_p50_ms, 0);
  EXPECT_GE(r->e2e_p50_ms, 3 * 29.9);
  EXPECT_GT(r->e2e_p50_ms, r->ttft_p50_ms);
  EXPECT_NEAR(r->tpot_p50_ms, (r->e2e_p50_ms - r->ttft_p50_ms) / 3, 1e-6);
  EXPECT_NEAR(r->itl_mean_ms, (r->e2e_p50_ms - r->ttft_p50_ms) / 3, 1e-6);
  EXPECT_GT(r->itl_p50_ms, 0);
  EXPECT_NEAR(r->user_tps_p50, 1000 / r->tpot_p50_ms, 1e-6);
}

// A stream keeps its connection for its next request (HTTP/1.1 keep-alive, as libcurl did).
TEST_P(RunLoadReaders, AStreamReusesItsConnection) {
  KeepAliveServer server(Chunk("a") + Chunk("b") + "data: [DONE]\n\n", /*per_connection=*/100);
  LoadSpec spec = Spec(server.port(), 1);
  spec.num_prompts = 5;
  auto r = RunLoad(spec);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 5u);
  EXPECT_EQ(r->errors, 0u) << r->first_error;
  EXPECT_EQ(server.connections(), 1);
}

// A connection the server closed while it was idle is found out when the next request on it
// gets no answer at all: the request is sent again on a new connection, not counted an error.
TEST_P(RunLoadReaders, AConnectionClosedWhileIdleIsReplacedNotCountedAnError) {
  KeepAliveServer server(Chunk("a") + "data: [DONE]\n\n", /*per_connection=*/1);
  LoadSpec spec = Spec(server.port(), 1);
  spec.num_prompts = 4;
  auto r = RunLoad(spec);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->requests, 4u);
  EXPECT_EQ(r->errors, 0u) << r->first_error;
  EXPECT_EQ(server.requests(), 4);
  EXPECT_EQ(server.connections(), 4);
}

TEST_P(RunLoadReaders, RefusesAnInvalidSpec) {
  LoadSpec spec;
  EXPECT_THAT(RunLoad(spec).status().message(), HasSubstr("needs a port"));
  spec.port = 8000;
  EXPECT_THAT(RunLoad(spec).status().message(), HasSubstr("served model name"));
  spec.model = "m";
  spec.concurrency = 0;
  EXPECT_THAT(RunLoad(spec).status().message(), HasSubstr("concurrency must be 1 to 10000"));
  spec.concurrency = 1;
  spec.request_rate = -1;
  EXPECT_THAT(RunLoad(spec).status().message(), HasSubstr("request rate"));
  spec.request_rate = 0;
  spec.goodput_tpot_ms = -5;
  EXPECT_THAT(RunLoad(spec).status().message(), HasSubstr("goodput limits"));
}

}  // namespace
}  // namespace berth
