// The front against Debian's real HAProxy 2.6 (run by each test in master-worker mode on
// loopback): requests held while no model server serves, the hold's bound, a route under load
// with a stream draining, seamless reloads, the ready path and the counters. Outcomes are
// counted; times appear only as generous bounds. HAProxy missing is a failure (CI installs it).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <thread>

#include "core/clock.h"
#include "core/front.h"
#include "planners/front_render.h"
#include "providers/front/haproxy_admin.h"
#include "tests/providers/front_harness.h"
#include "tests/providers/temp_dir.h"

namespace berth {
namespace {

using testing::FreePort;
using testing::HaproxyProcess;
using testing::HttpAnswer;
using testing::HttpCall;
using testing::TempDir;
using testing::TinyHttpServer;
using namespace std::chrono_literals;
using Time = std::chrono::steady_clock::time_point;

/// Polls `done` every 20 ms until it holds: false once `bound` passed (a bound, not a speed).
template <typename Condition>
bool WaitFor(Condition done, std::chrono::milliseconds bound = 30s) {
  for (Time deadline = std::chrono::steady_clock::now() + bound;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
}

/// A front on a free port with its sockets in a test dir, and the HAProxy running it.
class FrontTest : public ::testing::Test {
 protected:
  FrontSpec Spec() {
    FrontSpec spec = DefaultFrontSpec(FreePort());
    spec.bind = "127.0.0.1";
    spec.admin_socket = dir_ / "admin.sock";
    spec.master_socket = dir_ / "master.sock";
    spec.pid_file = dir_ / "haproxy.pid";
    spec.hold_socket = dir_ / "hold.sock";
    return spec;
  }

  void WriteConfig(const FrontSpec& spec) {
    auto config = RenderHaproxyConfig(spec);
    ASSERT_TRUE(config.ok()) << config.status().message();
    std::ofstream(dir_ / "haproxy.cfg") << *config;
  }

  /// Renders `spec`, starts HAProxy on it and connects the admin seam.
  void StartFront(const FrontSpec& spec) {
    WriteConfig(spec);
    haproxy_ = std::make_unique<HaproxyProcess>(dir_ / "haproxy.cfg", spec.master_socket,
                                                dir_ / "haproxy.log");
    std::string error;
    ASSERT_TRUE(haproxy_->Start(spec.admin_socket, &error)) << error;
    admin_ = std::make_unique<HaproxyAdmin>(HaproxyAdminOptions{spec.admin_socket});
    master_ = std::make_unique<HaproxyMaster>(HaproxyAdminOptions{spec.master_socket});
  }

  /// SIGUSR2 to the master, as systemctl reload sends it, once the master can take it (not
  /// while it re-executes); true when the master counted the reload within 30 s.
  bool SignalReload() {
    auto before = master_->Count();
    if (!WaitFor([&] { return (before = master_->Count()).ok(); })) return false;
    haproxy_->SignalReload();
    return WaitFor([&] {
      auto now = master_->Count();
      return now.ok() && now->done > before->done;
    });
  }

  /// HAProxy's counters; a failed read counts nothing.
  FrontStats Stats() {
    auto stats = admin_->Stats();
    return stats.ok() ? *stats : FrontStats{};
  }
  /// Times HAProxy tried a request on the hold server (nothing listens there) and retried it.
  int64_t HeldRetries() {
    FrontStats s = Stats();
    return s.Server(kFrontHoldServer) ? s.Server(kFrontHoldServer)->retries : 0;
  }

  void TearDown() override {
    if (HasFailure() && haproxy_) std::cerr << "haproxy log:\n" << haproxy_->log();
  }

  TempDir dir_;
  std::unique_ptr<HaproxyProcess> haproxy_;
  std::unique_ptr<HaproxyAdmin> admin_;
  std::unique_ptr<HaproxyMaster> master_;
};

/// Requests every 10 ms from a thread until stopped: what came back, in order.
class SteadyClient {
 public:
  explicit SteadyClient(int port) {
    thread_ = std::thread([this, port] {
      while (!stop_) {
        auto started = std::chrono::steady_clock::now();
        HttpAnswer a = HttpCall(port, "GET", "/v1/models");
        std::lock_guard<std::mutex> lock(mu_);
        answers_.push_back({started, a});
        std::this_thread::sleep_for(10ms);
      }
    });
  }
  ~SteadyClient() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  struct Sent {
    Time started;
    HttpAnswer answer;
  };
  std::vector<Sent> answers() {
    std::lock_guard<std::mutex> lock(mu_);
    return answers_;
  }
  /// Requests sent after `since` that `server` answered 200.
  int AnsweredSince(Time since, const std::string& server) {
    int n = 0;
    for (const Sent& s : answers())
      n += s.started > since && s.answer.status == 200 && s.answer.body.rfind(server + " ", 0) == 0;
    return n;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<Sent> answers_;
  std::thread thread_;
};

std::string Describe(const HttpAnswer& a) {
  return "outcome " + std::to_string(static_cast<int>(a.outcome)) + " status " +
         std::to_string(a.status) + " " + a.error + " body '" + a.body.substr(0, 80) + "'";
}

TEST_F(FrontTest, HeldRequestsGoToTheServerRoutedToWhenItComesUp) {
  FrontSpec spec = Spec();
  TinyHttpServer b("B", FreePort());
  spec.backends = {{"B", "127.0.0.1", b.port()}};
  spec.active = kFrontHoldServer;  // nothing serves yet: every request is held
  StartFront(spec);

  auto get = std::async(std::launch::async, [&] { return HttpCall(spec.port, "GET", "/x"); });
  const std::string body(200 * 1024, 'j');
  auto post = std::async(std::launch::async,
                         [&] { return HttpCall(spec.port, "POST", "/v1/completions", body); });
  // Both requests in and held (retried on the hold server) before B comes up.
  ASSERT_TRUE(WaitFor([&] { return Stats().current_sessions >= 2 && HeldRetries() >= 2; }));
  ASSERT_TRUE(b.Start());
  ASSERT_TRUE(admin_->Route("B").ok());

  HttpAnswer g = get.get();
  HttpAnswer p = post.get();
  ASSERT_TRUE(g.answered()) << Describe(g);
  ASSERT_TRUE(p.answered()) << Describe(p);
  EXPECT_EQ(g.status, 200) << Describe(g);
  EXPECT_EQ(g.body, "B GET 0\n");
  EXPECT_EQ(p.status, 200) << Describe(p);
  EXPECT_EQ(p.body, "B POST 204800\n");  // the whole body, replayed after the hold
  auto stats = admin_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_GT(stats->retries + stats->redispatches, 0);  // they were held, not sent at once
}

TEST_F(FrontTest, PastTheHoldBoundA503WithRetryAfterNeverARefusal) {
  FrontSpec spec = Spec();
  spec.hold_ms = 2000;
  spec.retry_after_s = 17;
  spec.backends = {{"B", "127.0.0.1", FreePort()}};  // never comes up
  spec.active = kFrontHoldServer;
  StartFront(spec);

  auto started = std::chrono::steady_clock::now();
  auto post = std::async(std::launch::async, [&] {
    return HttpCall(spec.port, "POST", "/v1/completions", std::string(200 * 1024, 'j'));
  });
  HttpAnswer g = HttpCall(spec.port, "GET", "/x");
  HttpAnswer p = post.get();
  auto took = std::chrono::steady_clock::now() - started;
  for (const HttpAnswer* a : {&g, &p}) {
    ASSERT_TRUE(a->answered()) << Describe(*a);
    EXPECT_EQ(a->status, 503) << Describe(*a);
    EXPECT_NE(a->head.find("\r\nretry-after: 17"), std::string::npos) << a->head;
  }
  EXPECT_GE(took, 1500ms);  // held first (about (retries + 1) rounds), not answered at once
  EXPECT_LT(took, 30s);     // a bound, not a speed
}

TEST_F(FrontTest, NoServerAtAllIsA503WithRetryAfterAtOnce) {
  FrontSpec spec = Spec();
  spec.backends = {{"B", "127.0.0.1", FreePort()}};
  spec.active = "";  // every server in maintenance
  StartFront(spec);
  HttpAnswer a = HttpCall(spec.port, "GET", "/x");
  ASSERT_TRUE(a.answered()) << Describe(a);
  EXPECT_EQ(a.status, 503);
  EXPECT_NE(a.head.find("\r\nretry-after: 30"), std::string::npos) << a.head;
}

TEST_F(FrontTest, RouteUnderLoadMovesNewRequestsAndLetsTheOldStreamFinish) {
  FrontSpec spec = Spec();
  TinyHttpServer a("A", FreePort());
  TinyHttpServer b("B", FreePort());
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  spec.backends = {{"A", "127.0.0.1", a.port()}, {"B", "127.0.0.1", b.port()}};
  spec.active = "A";
  StartFront(spec);

  auto stream =
      std::async(std::launch::async, [&] { return HttpCall(spec.port, "GET", "/stream?n=30"); });
  SteadyClient client(spec.port);
  // The stream and a steady load on A.
  ASSERT_TRUE(WaitFor([&] { return client.AnsweredSince(Time(), "A") >= 5; }));
  auto sessions_before = admin_->Sessions("A");
  ASSERT_TRUE(sessions_before.ok()) << sessions_before.status().message();
  EXPECT_GE(*sessions_before, 1);  // the stream
  ASSERT_TRUE(admin_->Route("B").ok());
  auto routed = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitFor([&] { return client.AnsweredSince(routed, "B") > 10; }));
  client.Stop();

  int failed = 0, after = 0, after_on_b = 0;
  for (const auto& sent : client.answers()) {
    if (!sent.answer.answered() || sent.answer.status != 200) {
      ++failed;
      ADD_FAILURE() << Describe(sent.answer);
      continue;
    }
    if (sent.started > routed) {
      ++after;
      after_on_b += sent.answer.body.rfind("B ", 0) == 0;
    }
  }
  EXPECT_EQ(failed, 0);
  EXPECT_GT(after, 10);
  EXPECT_EQ(after_on_b, after);

  HttpAnswer s = stream.get();
  ASSERT_TRUE(s.answered()) << Describe(s);
  EXPECT_NE(s.body.find("A tok 29\n"), std::string::npos);  // finished on A, after the route
  EXPECT_NE(s.body.find("\r\n0\r\n\r\n"), std::string::npos);
  Status drained = WaitForNoSessions(*admin_, "A", RealClock(), 30s, 100ms);
  EXPECT_TRUE(drained.ok()) << drained.message();
}

TEST_F(FrontTest, HoldThenRouteUnderLoadAnswersEveryRequest) {
  FrontSpec spec = Spec();
  TinyHttpServer a("A", FreePort());
  TinyHttpServer b("B", FreePort());
  ASSERT_TRUE(a.Start());
  spec.backends = {{"A", "127.0.0.1", a.port()}, {"B", "127.0.0.1", b.port()}};
  spec.active = "A";
  StartFront(spec);

  SteadyClient client(spec.port);
  ASSERT_TRUE(WaitFor([&] { return client.AnsweredSince(Time(), "A") >= 3; }));
  ASSERT_TRUE(admin_->Hold().ok());
  a.Stop();  // the old server goes; nothing listens until a request is held
  ASSERT_TRUE(WaitFor([&] { return HeldRetries() > 0; }));
  ASSERT_TRUE(b.Start());
  auto routed = std::chrono::steady_clock::now();
  ASSERT_TRUE(admin_->Route("B").ok());
  EXPECT_TRUE(WaitFor([&] { return client.AnsweredSince(routed, "B") > 10; }));
  client.Stop();
  int failed = 0, on_b = 0;
  for (const auto& sent : client.answers()) {
    if (!sent.answer.answered() || sent.answer.status != 200) {
      ++failed;
      ADD_FAILURE() << Describe(sent.answer);
    }
    on_b += sent.answer.body.rfind("B ", 0) == 0;
  }
  EXPECT_EQ(failed, 0);
  EXPECT_GT(on_b, 10);
}

TEST_F(FrontTest, ReloadsUnderLoadRefuseNothingAndKeepTheStream) {
  FrontSpec spec = Spec();
  TinyHttpServer a("A", FreePort());
  ASSERT_TRUE(a.Start());
  spec.backends = {{"A", "127.0.0.1", a.port()}};
  spec.active = "A";
  StartFront(spec);

  auto stream =
      std::async(std::launch::async, [&] { return HttpCall(spec.port, "GET", "/stream?n=40"); });
  SteadyClient client(spec.port);
  // Between reloads, and after the last, the front answers new requests.
  auto answering = [&] {
    Time now = std::chrono::steady_clock::now();
    return WaitFor([&] { return client.AnsweredSince(now, "A") >= 3; });
  };
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(answering());
    spec.retry_after_s = 10 + i;  // a changed configuration each time
    WriteConfig(spec);
    if (i % 2 == 0) {
      Status reloaded = master_->Reload(RealClock(), 30s);
      ASSERT_TRUE(reloaded.ok()) << reloaded.message();
    } else {
      ASSERT_TRUE(SignalReload());
    }
  }
  ASSERT_TRUE(answering());
  client.Stop();
  int failed = 0;
  for (const auto& sent : client.answers()) {
    if (!sent.answer.answered() || sent.answer.status != 200) {
      ++failed;
      ADD_FAILURE() << Describe(sent.answer);
    }
  }
  EXPECT_EQ(failed, 0);
  EXPECT_GT(client.answers().size(), 20u);
  HttpAnswer s = stream.get();
  ASSERT_TRUE(s.answered()) << Describe(s);
  EXPECT_NE(s.body.find("A tok 39\n"), std::string::npos);
  // The reloads happened, each loaded a new worker.
  std::string log = haproxy_->log();
  int reloads = 0;
  for (size_t at = 0; (at = log.find("Reloading HAProxy", at)) != std::string::npos; ++at)
    ++reloads;
  EXPECT_EQ(reloads, 5) << log;
  auto counted = master_->Count();
  ASSERT_TRUE(counted.ok()) << counted.status().message();
  EXPECT_EQ(counted->done, 5);
  EXPECT_EQ(counted->failed, 0);
  EXPECT_EQ(log.find("ALERT"), std::string::npos) << log;
}

TEST_F(FrontTest, TheReadyPathFollowsSetReady) {
  FrontSpec spec = Spec();
  spec.ready_path = "/berth/ready";
  spec.active = "";
  StartFront(spec);
  EXPECT_EQ(HttpCall(spec.port, "GET", "/berth/ready").status, 200);
  ASSERT_TRUE(admin_->SetReady(false).ok());
  EXPECT_EQ(HttpCall(spec.port, "GET", "/berth/ready").status, 503);
  ASSERT_TRUE(admin_->SetReady(true).ok());
  EXPECT_EQ(HttpCall(spec.port, "GET", "/berth/ready").status, 200);
  // A reload renders the state berth asks for.
  spec.ready = false;
  WriteConfig(spec);
  Status reloaded = master_->Reload(RealClock(), 30s);
  ASSERT_TRUE(reloaded.ok()) << reloaded.message();
  EXPECT_TRUE(WaitFor([&] { return HttpCall(spec.port, "GET", "/berth/ready").status == 503; }));
}

TEST_F(FrontTest, StatsCountRequestsSessionsAnd503s) {
  FrontSpec spec = Spec();
  TinyHttpServer a("A", FreePort());
  ASSERT_TRUE(a.Start());
  spec.backends = {{"A", "127.0.0.1", a.port()}, {"B", "127.0.0.1", FreePort()}};
  spec.active = "A";
  StartFront(spec);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(HttpCall(spec.port, "GET", "/x").status, 200);
  ASSERT_TRUE(admin_->Drain("A").ok());  // no server left to pick: 503 at once
  EXPECT_EQ(HttpCall(spec.port, "GET", "/x").status, 503);

  // HAProxy adds to its counters as a stream goes, some a moment after the client had its
  // answer (the frontend counts a request when it arrives, a 5xx and a server's session when the
  // stream ends): read until every counter checked below has caught up (a bound, not a speed).
  auto settled = [](const Result<FrontStats>& s) {
    return s.ok() && s->requests >= 6 && s->responses_5xx >= 1 && s->Server("A") &&
           s->Server("A")->total_sessions >= 5 && s->Server("A")->current_sessions == 0;
  };
  auto stats = admin_->Stats();
  WaitFor([&] { return settled(stats = admin_->Stats()); });
  ASSERT_TRUE(stats.ok()) << stats.status().message();
  EXPECT_EQ(stats->requests, 6);
  EXPECT_EQ(stats->responses_5xx, 1) << *admin_->Command("show stat");
  ASSERT_NE(stats->Server("A"), nullptr);
  EXPECT_EQ(stats->Server("A")->total_sessions, 5);
  EXPECT_EQ(stats->Server("A")->current_sessions, 0);
  EXPECT_EQ(stats->Server("A")->status, "DRAIN");
  ASSERT_NE(stats->Server("B"), nullptr);
  EXPECT_EQ(stats->Server("B")->status, "MAINT");
  ASSERT_NE(stats->Server("hold"), nullptr);
  EXPECT_EQ(stats->servers.size(), 3u);

  EXPECT_EQ(admin_->Route("nope").code(), Status::Code::kNotFound);
  EXPECT_EQ(admin_->Drain("A;shutdown").code(), Status::Code::kInvalidArgument);
  auto missing = admin_->Sessions("nope");
  EXPECT_FALSE(missing.ok());
}

TEST_F(FrontTest, AnAbsentSocketIsAnErrorNamingItAndTheCommand) {
  HaproxyAdmin admin(HaproxyAdminOptions{dir_ / "absent.sock"});
  auto stats = admin.Stats();
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(stats.status().message().find("absent.sock"), std::string::npos);
  EXPECT_NE(stats.status().message().find("show stat"), std::string::npos);
}

TEST(FrontRenderTest, TheConfigurationHAProxyChecksIsDeterministic) {
  FrontSpec spec = DefaultFrontSpec(8000);
  spec.backends = {{"kimi", "127.0.0.1", 8001}, {"minimax", "127.0.0.1", 8002}};
  spec.active = "kimi";
  spec.ready_path = "/berth/ready";
  auto a = RenderHaproxyConfig(spec);
  auto b = RenderHaproxyConfig(spec);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, *b);
  EXPECT_NE(a->find("  server kimi 127.0.0.1:8001\n"), std::string::npos);
  EXPECT_NE(a->find("  server minimax 127.0.0.1:8002 disabled\n"), std::string::npos);
  EXPECT_NE(a->find("  server hold unix@/run/berth/front-8000/hold.sock disabled\n"),
            std::string::npos);
  EXPECT_EQ(a->find("abns@"), std::string::npos) << "an abstract name anyone could bind first";
  EXPECT_NE(a->find("  retries 599\n"), std::string::npos);
  EXPECT_NE(a->find("  option http-no-delay\n"), std::string::npos) << "streams held by the kernel";
  EXPECT_EQ(FrontRetries(2000), 1u);
  EXPECT_EQ(FrontRetries(1), 1u);
  EXPECT_EQ(FrontRetries(UINT64_MAX / 2), kFrontMaxRetries);

  TempDir dir;
  dir.Write("haproxy.cfg", *a);
  std::string check = HaproxyProcess::Binary() + " -c -q -f " + (dir / "haproxy.cfg");
  EXPECT_EQ(std::system(check.c_str()), 0) << *a;
}

// Every bind the manifest takes (IsFrontBindAddress) is one HAProxy takes as one address; a
// list, a range, a path or a prefix is refused before any file is written.
TEST(FrontRenderTest, EveryBindBerthTakesIsOneAddressHAProxyTakes) {
  TempDir dir;
  for (const char* bind : {"0.0.0.0", "127.0.0.1", "::", "::1", "[::1]", "localhost"}) {
    SCOPED_TRACE(bind);
    FrontSpec spec = DefaultFrontSpec(8000);
    spec.bind = bind;
    auto config = RenderHaproxyConfig(spec);
    ASSERT_TRUE(config.ok()) << config.status().message();
    dir.Write("haproxy.cfg", *config);
    std::string check = HaproxyProcess::Binary() + " -c -q -f " + (dir / "haproxy.cfg");
    EXPECT_EQ(std::system(check.c_str()), 0) << *config;
  }
  for (const char* bind : {"0.0.0.0:1-65535,0.0.0.0", "unix@/tmp/x", "/tmp/x", "127.0.0.1:18000"}) {
    FrontSpec spec = DefaultFrontSpec(8000);
    spec.bind = bind;
    auto config = RenderHaproxyConfig(spec);
    ASSERT_FALSE(config.ok()) << bind;
    EXPECT_THAT(config.status().message(), ::testing::HasSubstr("is not one IPv4 or IPv6 address"));
  }
}

TEST(FrontRenderTest, NamesThatWouldChangeTheConfigurationAreRefused) {
  FrontSpec spec = DefaultFrontSpec(8000);
  spec.backends = {{"a b", "127.0.0.1", 8001},
                   {"hold", "127.0.0.1", 8002},
                   {"x", "127.0.0.1\n  server evil 1.2.3.4:80", 8003},
                   {"x", "127.0.0.1", 0}};
  spec.active = "nobody";
  spec.ready_path = "/ready #";
  auto config = RenderHaproxyConfig(spec);
  ASSERT_FALSE(config.ok());
  const std::string m = config.status().message();
  for (const char* want : {"'a b'", "'hold' is the hold", "host is not", "named twice", "port 0",
                           "active 'nobody'", "ready path"})
    EXPECT_NE(m.find(want), std::string::npos) << want << " in " << m;
}

TEST(FrontRenderTest, TheUnitRunsMasterWorkerAndReloadsBySignal) {
  FrontSpec spec = DefaultFrontSpec(8000);
  auto unit = RenderFrontUnit(spec, "/var/lib/berth/front/8000/haproxy.cfg");
  ASSERT_TRUE(unit.ok()) << unit.status().message();
  for (const char* want :
       {"Type=notify\n", "RuntimeDirectory=berth/front-8000\n",
        "ExecStartPre=\"/usr/sbin/haproxy\" -c -q -f \"/var/lib/berth/front/8000/haproxy.cfg\"\n",
        "ExecStart=\"/usr/sbin/haproxy\" -Ws -f \"/var/lib/berth/front/8000/haproxy.cfg\" -p "
        "\"/run/berth/front-8000/haproxy.pid\" -S \"/run/berth/front-8000/master.sock,mode,600\"\n",
        "ExecReload=/bin/kill -USR2 $MAINPID\n", "KillMode=mixed\n", "Restart=on-failure\n"})
    EXPECT_NE(unit->find(want), std::string::npos) << want << " in\n" << *unit;
  EXPECT_EQ(unit->rfind("# Managed by berth", 0), 0u);
  EXPECT_FALSE(RenderFrontUnit(spec, "relative.cfg").ok());
}

}  // namespace
}  // namespace berth
