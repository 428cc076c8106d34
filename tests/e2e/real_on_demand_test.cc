// On-demand services with the real engine (issue 41, docs/operating.md "On-demand services"):
// the units berth writes (berth-wake-S.socket, the proxy berth-wake-S.service, the model server
// S.service) on the sandboxed systemd, the model servers real llama-servers on tiny random-weight
// GGUFs (tests/e2e/real_engine_fixture.h), and the berth the units call the one built here.
// Times are judged against systemd's own record of the server unit (its monotonic timestamps,
// the clock the client reads too), not against the wall clock of a busy machine; every request
// and every wait is bounded, so a hung server fails the test.
#include <gmock/gmock.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/cli/commands.h"
#include "tests/e2e/real_engine_fixture.h"

namespace berth::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// One HTTP/1.1 POST on a fresh connection, read to its end (90 s at most), as a client of the
// socket sees it: argv PORT PATH BODY. Prints one JSON line: status (0: no status line), t0 (just
// before connecting), t_first (the first byte of the answer came), t_end, in seconds of
// CLOCK_MONOTONIC (systemd's *TimestampMonotonic clock); body (dechunked, its first 4000
// characters); and of a stream of server-sent events: chunks, models (each distinct `model`),
// finish (the last finish_reason), text; error when the connection failed.
constexpr const char* kClient = R"PY(
import json, socket, sys, time
port, path, body = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()
r = {"status": 0, "t0": time.monotonic()}
raw = b""
try:
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\nConnection: close\r\n\r\n" % (path, port, len(body))).encode()
              + body)
    end = time.monotonic() + 90
    while time.monotonic() < end:
        b = s.recv(65536)
        if not b:
            break
        if "t_first" not in r:
            r["t_first"] = time.monotonic()
        raw += b
    s.close()
except Exception as e:
    r["error"] = repr(e)
r["t_end"] = time.monotonic()
head, _, rest = raw.partition(b"\r\n\r\n")
lines = head.decode(errors="replace").split("\r\n")
if lines[0].startswith("HTTP/"):
    r["status"] = int(lines[0].split()[1])
if "transfer-encoding: chunked" in head.decode(errors="replace").lower():
    out = b""
    while rest:
        n, _, rest = rest.partition(b"\r\n")
        n = int(n.split(b";")[0].strip() or b"0", 16)
        if n == 0:
            break
        out += rest[:n]
        rest = rest[n + 2:]
    rest = out
text = rest.decode(errors="replace")
r["body"] = text[:4000]
r["chunks"], r["models"], r["finish"], r["text"] = 0, [], None, ""
for line in text.splitlines():
    if not line.startswith("data: ") or line.strip() == "data: [DONE]":
        continue
    try:
        c = json.loads(line[6:])
    except ValueError:
        continue
    r["chunks"] += 1
    if c.get("model") not in r["models"]:
        r["models"].append(c.get("model"))
    for ch in c.get("choices", []):
        r["finish"] = ch.get("finish_reason") or r["finish"]
        r["text"] += ch.get("text") or (ch.get("delta") or {}).get("content") or ""
print(json.dumps(r))
)PY";

/// What the client saw of one request; times in µs of CLOCK_MONOTONIC.
struct Answer {
  int status = 0;
  uint64_t t0 = 0, first = 0, end = 0;
  nlohmann::json raw;  // the client's whole record
  uint64_t WaitMs() const { return first > t0 ? (first - t0) / 1000 : 0; }
  uint64_t TotalMs() const { return (end - t0) / 1000; }
  std::string Models() const { return raw.contains("models") ? raw["models"].dump() : "[]"; }
  std::string Finish() const {
    return raw.contains("finish") && raw["finish"].is_string() ? raw["finish"].get<std::string>()
                                                               : "";
  }
  std::string Body() const { return raw.value("body", ""); }
};

std::string Show(const Answer& a) { return a.raw.dump(); }

/// An on-demand llama-server service of the manifest.
struct OnDemandSvc {
  std::string name;
  std::string model = "tiny";  // a model of MakeGguf
  int port = 0;                // the socket's (the clients')
  int server_port = 0;         // the server's, on loopback
  std::string idle_stop = "30s";
  std::string swap_group;
  std::string more;  // further lines of the service, indented by 4
};

class RealOnDemandTest : public RealEngineSuite {
 protected:
  void TearDown() override {
    // The sandbox's teardown removes .service units only: the sockets go first, so that nothing
    // starts a proxy (and its server) while the services stop.
    if (systemd_ && HasFailure()) {
      // What each unit said, for the failure's reader.
      for (const auto& e : std::filesystem::directory_iterator(sandbox_->units_dir())) {
        if (e.is_symlink() || e.is_directory()) continue;
        std::string name = e.path().filename().string();
        std::cout << "--- journal of " << name << " (" << ActiveState(name) << ")\n";
        for (const std::string& line : journal_->Tail(name, 40)) std::cout << line << "\n";
      }
      if (!fronts_.empty())
        for (const auto& e : std::filesystem::directory_iterator(fronts_))
          if (e.path().extension() == ".cfg")
            std::cout << "--- " << e.path().string() << "\n" << ReadAll(e.path().string());
    }
    if (systemd_) {
      for (const auto& e : std::filesystem::directory_iterator(sandbox_->units_dir())) {
        std::string name = e.path().filename().string();
        if (!name.ends_with(".socket") || e.is_symlink()) continue;
        (void)systemd_->Stop(name, seconds(20));
        std::filesystem::remove(e.path());
      }
      std::error_code ec;
      std::filesystem::remove_all(sandbox_->units_dir() + "/sockets.target.wants", ec);
    }
    RealEngineSuite::TearDown();
    std::error_code ec;
    if (!fronts_.empty()) std::filesystem::remove_all(fronts_, ec);
  }

  OnDemandSvc Svc(const std::string& name, const std::string& model = "tiny",
                  const std::string& idle_stop = "30s", const std::string& group = "") {
    OnDemandSvc s{name, model, FreePort(), FreePort(), idle_stop, group, ""};
    while (s.server_port == s.port) s.server_port = FreePort();
    return s;
  }
  /// The manifest of `services`, each a llama-server on the CPU with one generation thread (the
  /// machine has two cores and its threads spin), its alias its service name; `top`: lines
  /// after host: (fronts:), and then the services bind no address of their own.
  std::string Manifest(const std::vector<OnDemandSvc>& services, const std::string& top = "") {
    std::ostringstream m;
    m << "berth: 1\nhost:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir()
      << "\n  executables: {llama-server: " << LLAMA_SERVER_BIN << ", berth: " << BERTH_BIN << "}\n"
      << top << "models:\n";
    std::vector<std::string> models;
    for (const OnDemandSvc& s : services) {
      if (std::find(models.begin(), models.end(), s.model) != models.end()) continue;
      models.push_back(s.model);
      m << "  " << s.model << ": {source: hf://org/" << s.model << ", revision: " << kGgufCommit
        << "}\n";
    }
    m << "services:\n";
    for (const OnDemandSvc& s : services) {
      m << "  " << s.name << ":\n    model: " << s.model
        << "\n    engine: llama-server\n    port: " << s.port
        << (top.empty() ? "\n    bind: 127.0.0.1" : "")
        << "\n    on_demand: true\n    idle_stop: " << s.idle_stop
        << "\n    server_port: " << s.server_port << "\n";
      if (!s.swap_group.empty()) m << "    swap_group: " << s.swap_group << "\n";
      m << "    llama_server: {model_file: model.gguf, n_gpu_layers: 0, ctx_size: 512, "
           "parallel: 2, threads: 1, alias: "
        << s.name << "}\n    health: {timeout: 60s, interval: 10ms}\n"
        << s.more;
    }
    return WriteManifest(m.str());
  }
  int Apply(const std::string& manifest) { return ApplyIn(manifest, out_, err_); }
  int Plan(const std::string& manifest) {
    PlanCommand cmd;
    cmd.manifest_path = manifest;
    cmd.host.bus_address = sandbox_->system_bus_address();
    cmd.host.journal_dir = sandbox_->journal_dir();
    cmd.state_dir = (tmp_ / "state").string();
    cmd.detailed_exitcode = true;
    out_.str("");
    err_.str("");
    return RunPlan(cmd, out_, err_);
  }

  /// A streamed completion of `max_tokens` asked of model `model` on `port` (chat: the chat
  /// route), as a client sees it, bounded (120 s for the whole, the client's own 60 s per read).
  static Answer Stream(int port, const std::string& model, bool chat = false, int max_tokens = 8) {
    nlohmann::json body = {{"model", model}, {"max_tokens", max_tokens}, {"stream", true}};
    if (chat)
      body["messages"] = {{{"role", "user"}, {"content", "Say hello."}}};
    else
      body["prompt"] = "Say hello.";
    return Post(port, chat ? "/v1/chat/completions" : "/v1/completions", body.dump());
  }
  static Answer Post(int port, const std::string& path, const std::string& body) {
    CommandResult r = RunCommand(
        {"/usr/bin/python3", "-c", kClient, std::to_string(port), path, body}, {}, seconds(120));
    Answer a;
    std::string last = r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1);
    a.raw = nlohmann::json::parse(r.ok() ? last : "", nullptr, false);
    if (a.raw.is_discarded()) {
      a.raw = {{"client", r.output + r.error}};
      return a;
    }
    a.status = a.raw.value("status", 0);
    auto us = [&](const char* key) {
      return a.raw.contains(key) ? static_cast<uint64_t>(a.raw[key].get<double>() * 1e6) : 0;
    };
    a.t0 = us("t0");
    a.first = us("t_first");
    a.end = us("t_end");
    return a;
  }

  /// systemd's monotonic timestamp `property` of `unit` (InactiveExitTimestampMonotonic ...), in
  /// µs of CLOCK_MONOTONIC; 0 when unset or unknown.
  uint64_t MonotonicUs(const std::string& unit, const std::string& property) {
    CommandResult r = sandbox_->Exec({"systemctl", "show", "--value", "-p", property, unit});
    return r.ok() ? std::strtoull(r.output.c_str(), nullptr, 10) : 0;
  }
  std::string Invocation(const std::string& unit) {
    auto units = systemd_->GetUnits({unit});
    return units.ok() && !units->empty() ? (*units)[0].invocation_id : "(unknown)";
  }
  /// How many of the last 500 journal lines of `unit` contain `text`.
  int JournalCount(const std::string& unit, const std::string& text) {
    int n = 0;
    for (const std::string& line : journal_->Tail(unit, 500))
      n += line.find(text) != std::string::npos;
    return n;
  }
  /// Whether process `pid` of the sandbox (systemd's MainPID) exists now.
  bool Exists(uint32_t pid) {
    return sandbox_->PidnsExec({"/bin/kill", "-0", std::to_string(pid)}).ok();
  }
  /// Whether `state` (an ActiveState) has processes of the unit, or is on its way to.
  static bool Runs(const std::string& state) {
    return state != "inactive" && state != "failed" && state != "(unknown)";
  }

  std::string fronts_;  // host.front_dir of a manifest with fronts: ("": none)
  std::ostringstream out_, err_;
};

// The first request to an idle model is not refused: it waits in the socket's backlog while
// systemd starts the real llama-server, and is answered once the server is healthy. Its wait
// is the server's start as systemd recorded it (InactiveExit → ActiveEnter: the process started,
// loaded the GGUF and answered /health 200) and the stream's first byte comes after that.
TEST_F(RealOnDemandTest, AFirstRequestToAnIdleModelWaitsForItsStartAndIsStreamed) {
  MakeGguf("tiny");
  OnDemandSvc chat = Svc("chat");
  const std::string m = Manifest({chat});
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  ASSERT_EQ(ActiveState("chat.service"), "inactive") << "the plan never starts the server";
  ASSERT_EQ(ActiveState("berth-wake-chat.socket"), "active");

  Answer a = Stream(chat.port, "chat", /*chat=*/true);
  ASSERT_EQ(a.status, 200) << Show(a);
  EXPECT_GT(a.raw.value("chunks", 0), 0) << Show(a);
  EXPECT_FALSE(a.Finish().empty()) << "the stream did not complete: " << Show(a);
  EXPECT_EQ(a.Models(), "[\"chat\"]") << Show(a);

  const uint64_t started = MonotonicUs("chat.service", "InactiveExitTimestampMonotonic");
  const uint64_t active = MonotonicUs("chat.service", "ActiveEnterTimestampMonotonic");
  ASSERT_GT(started, 0u);
  ASSERT_GE(active, started);
  const uint64_t start_ms = (active - started) / 1000;
  // This request started the server, after it was sent; it waited for the whole start, and its
  // first byte came only once the unit was active (healthy).
  EXPECT_GE(started, a.t0) << "the server was started before the request: " << Show(a);
  EXPECT_GE(a.first, active) << "answered before the server was healthy: " << Show(a);
  EXPECT_GE(a.WaitMs(), start_ms) << Show(a);
  // And not much longer: the proxy relays as soon as the server is up (a generous bound, for a
  // busy two-core machine; the server's start itself is not bounded here).
  EXPECT_LT((a.first - active) / 1000, 15000u) << Show(a);

  // Once it runs, a request is answered by the same server: no new start.
  const std::string running = Invocation("chat.service");
  Answer b = Stream(chat.port, "chat");
  EXPECT_EQ(b.status, 200) << Show(b);
  EXPECT_FALSE(b.Finish().empty()) << Show(b);
  EXPECT_EQ(Invocation("chat.service"), running);
  std::cout << "[ figures  ] first request: first byte after " << a.WaitMs()
            << " ms; the server's start (systemd) " << start_ms << " ms; next request "
            << b.WaitMs() << " ms\n";
}

// With idle_stop: 2s the proxy exits two seconds after the last connection, nothing wants the
// server any more (StopWhenUnneeded=yes) and systemd stops it: the unit goes inactive, its main
// process is gone (its memory comes back), nothing listens on its port; the clients' port stays
// held, and the next request starts a new server.
TEST_F(RealOnDemandTest, AnIdleServerStopsAfterIdleStopAndItsProcessIsGone) {
  MakeGguf("tiny");
  OnDemandSvc chat = Svc("chat", "tiny", "2s");
  const std::string m = Manifest({chat});
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  Answer a = Stream(chat.port, "chat");
  ASSERT_EQ(a.status, 200) << Show(a);
  auto units = systemd_->GetUnits({"chat.service"});
  ASSERT_TRUE(units.ok() && !units->empty());
  const uint32_t pid = (*units)[0].main_pid;
  const std::string first = (*units)[0].invocation_id;
  ASSERT_GT(pid, 0u);
  ASSERT_TRUE(Exists(pid)) << "llama-server (pid " << pid << ") is not there while it serves";

  ASSERT_TRUE(WaitFor([&] { return ActiveState("chat.service") == "inactive"; }, seconds(30)))
      << "chat.service is still " << ActiveState("chat.service") << " 30 s after its request";
  EXPECT_FALSE(Exists(pid)) << "llama-server (pid " << pid << ") outlived its unit";
  EXPECT_EQ(Get(chat.server_port, "/health"), "") << "something still serves the model's port";
  EXPECT_EQ(ActiveState("berth-wake-chat.service"), "inactive");
  EXPECT_EQ(ActiveState("berth-wake-chat.socket"), "active") << "the port stays held";
  // Not before its idle stop after the last byte the client got (systemd's record of the stop).
  const uint64_t stopping = MonotonicUs("chat.service", "ActiveExitTimestampMonotonic");
  ASSERT_GT(stopping, a.end);
  const uint64_t idle_ms = (stopping - a.end) / 1000;
  EXPECT_GE(idle_ms, 1900u) << "stopped before idle_stop: " << Show(a);

  // And the next request starts it again.
  Answer b = Stream(chat.port, "chat");
  EXPECT_EQ(b.status, 200) << Show(b);
  EXPECT_NE(Invocation("chat.service"), first);
  std::cout << "[ figures  ] chat.service began to stop " << idle_ms
            << " ms after its last request (idle_stop 2s)\n";
}

// Two llama-servers of one swap group on the CPU: requests to a, b, a each succeed, answered by
// the model asked for, and the two server units never run at once: polled while each request
// is served, and exactly as systemd recorded it (a member left inactive only after the other
// had become inactive).
TEST_F(RealOnDemandTest, TwoModelsOfASwapGroupTakeTurnsAndNeverRunTogether) {
  MakeGguf("ma", {"--seed", "1"});
  MakeGguf("mb", {"--seed", "2"});
  OnDemandSvc a = Svc("chat", "ma", "30s", "cpu");
  OnDemandSvc b = Svc("coder", "mb", "30s", "cpu");
  const std::string m = Manifest({a, b});
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  std::vector<std::string> seen;  // every pair of states observed while a request was served
  for (const OnDemandSvc* s : {&a, &b, &a}) {
    SCOPED_TRACE("request to " + s->name);
    std::atomic<bool> done = false;
    std::string both;  // the first pair of states seen where both run
    Answer answer;
    std::thread client([&] {
      answer = Stream(s->port, s->name);
      done = true;
    });
    auto end = std::chrono::steady_clock::now() + seconds(150);
    while (!done && std::chrono::steady_clock::now() < end) {
      auto units = systemd_->GetUnits({"chat.service", "coder.service"});
      if (units.ok() && units->size() == 2) {
        std::string pair = (*units)[0].active_state + "/" + (*units)[1].active_state;
        if (seen.empty() || seen.back() != pair) seen.push_back(pair);
        if (Runs((*units)[0].active_state) && Runs((*units)[1].active_state) && both.empty())
          both = pair;
      }
      std::this_thread::sleep_for(milliseconds(5));
    }
    client.join();
    EXPECT_EQ(both, "") << "chat and coder both ran (chat/coder)";
    ASSERT_EQ(answer.status, 200) << Show(answer);
    EXPECT_FALSE(answer.Finish().empty()) << Show(answer);
    EXPECT_EQ(answer.Models(), "[\"" + s->name + "\"]") << Show(answer);
    EXPECT_EQ(ActiveState(s->name + ".service"), "active");
    const OnDemandSvc* other = s == &a ? &b : &a;
    EXPECT_EQ(ActiveState(other->name + ".service"), "inactive");
    if (uint64_t stopped =
            MonotonicUs(other->name + ".service", "InactiveEnterTimestampMonotonic")) {
      EXPECT_GE(MonotonicUs(s->name + ".service", "InactiveExitTimestampMonotonic"), stopped)
          << s->name << " started before " << other->name << " had stopped";
    }
    std::cout << "[ figures  ] " << s->name << ": first byte after " << answer.WaitMs() << " ms\n";
  }
  std::cout << "[ figures  ] chat/coder states seen: " << ::testing::PrintToString(seen) << "\n";
}

// A model file cut short (its header intact, so the plan accepts it; the engine check, which
// would refuse it, is off): llama-server exits while loading it. The request gets
// __wake-proxy's 503 naming the unit within a bound, not a hang and not a refusal, and the next
// request starts the server again (a new invocation of the unit).
TEST_F(RealOnDemandTest, AModelThatCannotLoadAnswers503AndTheNextRequestTriesAgain) {
  MakeGguf("cut", {"--truncate", "4096"});
  OnDemandSvc bad = Svc("broken", "cut");
  bad.more = "    preflight: {engine: off}\n";
  const std::string m = Manifest({bad});
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  std::string last;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    Answer a = Stream(bad.port, "broken");
    EXPECT_EQ(a.status, 503) << Show(a);
    EXPECT_THAT(a.Body(), HasSubstr("the model server broken.service did not start (journalctl "
                                    "-u broken.service says why)"))
        << Show(a);
    EXPECT_LT(a.TotalMs(), 30000u) << Show(a);
    // This request's start: the unit left inactive after the request was sent.
    EXPECT_GE(MonotonicUs("broken.service", "InactiveExitTimestampMonotonic"), a.t0) << Show(a);
    const std::string invocation = Invocation("broken.service");
    EXPECT_THAT(invocation, Not(AnyOf("", "(unknown)")));
    EXPECT_NE(invocation, last) << "no new start of broken.service";
    last = invocation;
    EXPECT_THAT(ActiveState("broken.service"), AnyOf("failed", "inactive"));
    EXPECT_EQ(ActiveState("berth-wake-broken.socket"), "active") << "the port stays held";
    // Each request started the real server, whose process exited on the file: systemd's record
    // of it once per request in the unit's journal (which journald may write a moment later).
    WaitFor([&] { return JournalCount("broken.service", "Main process exited") >= attempt; },
            seconds(10));
    EXPECT_EQ(JournalCount("broken.service", "Main process exited"), attempt)
        << "journalctl -u broken.service: not one exit of the server per request";
    std::cout << "[ figures  ] attempt " << attempt << ": " << a.status << " after " << a.TotalMs()
              << " ms\n";
  }
  // Why: llama.cpp's own words. It logs from a thread of its own, so the lines just before its
  // exit may be lost; one of the two starts says so.
  EXPECT_GE(JournalCount("broken.service", "failed to load model"), 1);
}

// berth apply and plan leave an idle and a running on-demand llama-server alone: the plan has
// nothing to do, the apply changes nothing, and the running server is the same invocation.
TEST_F(RealOnDemandTest, ApplyLeavesAnIdleAndARunningServerAlone) {
  MakeGguf("tiny");
  OnDemandSvc chat = Svc("chat", "tiny", "60s");
  const std::string m = Manifest({chat});
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();

  EXPECT_EQ(Plan(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("idle: port " + std::to_string(chat.port))) << out_.str();
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("No changes")) << out_.str();
  EXPECT_EQ(ActiveState("chat.service"), "inactive") << out_.str();

  Answer a = Stream(chat.port, "chat");
  ASSERT_EQ(a.status, 200) << Show(a);
  const std::string running = Invocation("chat.service");
  EXPECT_EQ(Plan(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("running (woken by a request on port")) << out_.str();
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("No changes")) << out_.str();
  EXPECT_EQ(ActiveState("chat.service"), "active");
  EXPECT_EQ(Invocation("chat.service"), running) << "berth restarted the server";
  Answer b = Stream(chat.port, "chat");
  EXPECT_EQ(b.status, 200) << Show(b);
  EXPECT_EQ(Invocation("chat.service"), running);
}

// One port, several models (a front with route: model): each request goes to the on-demand
// service whose served name (its alias) is the request's `model`. Two streams at once for two
// models both complete, each answered by its own model, both servers started by them; a model
// no service serves gets OpenAI's 404 naming the models served, and starts nothing.
TEST_F(RealOnDemandTest, OnePortServesTwoModelsEachRequestAnsweredByItsOwn) {
  MakeGguf("ma", {"--seed", "1"});
  MakeGguf("mb", {"--seed", "2"});
  const int port = FreePort();
  OnDemandSvc a = Svc("chat", "ma");
  OnDemandSvc b = Svc("coder", "mb");
  a.port = b.port = port;
  // Their sockets on loopback backend ports, the front on `port`.
  a.more = "    backend_port: " + std::to_string(FreePort()) + "\n";
  b.more = "    backend_port: " + std::to_string(FreePort()) + "\n";
  fronts_ = "/tmp/brf-" + std::to_string(::getpid()) + "-" + std::to_string(port);
  std::filesystem::create_directories(fronts_);
  const std::string m = Manifest({a, b}, "  front_dir: " + fronts_ + "\nfronts:\n  " +
                                             std::to_string(port) + ": {route: model}\n");
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_EQ(ActiveState("chat.service"), "inactive");
  EXPECT_EQ(ActiveState("coder.service"), "inactive");

  Answer unknown = Stream(port, "nope", /*chat=*/true);
  EXPECT_EQ(unknown.status, 404) << Show(unknown);
  auto error = nlohmann::json::parse(unknown.Body(), nullptr, false);
  ASSERT_TRUE(error.is_object() && error.contains("error")) << Show(unknown);
  const std::string message = error["error"].value("message", "");
  EXPECT_EQ(error["error"].value("type", ""), "invalid_request_error") << Show(unknown);
  EXPECT_EQ(error["error"].value("code", ""), "model_not_found") << Show(unknown);
  EXPECT_THAT(message, HasSubstr("nope")) << Show(unknown);
  EXPECT_THAT(message, HasSubstr("chat")) << Show(unknown);
  EXPECT_THAT(message, HasSubstr("coder")) << Show(unknown);
  EXPECT_EQ(ActiveState("chat.service"), "inactive") << "an unknown model started a server";
  EXPECT_EQ(ActiveState("coder.service"), "inactive") << "an unknown model started a server";

  Answer answers[2];
  std::thread second([&] { answers[1] = Stream(port, "coder", /*chat=*/true, 32); });
  answers[0] = Stream(port, "chat", /*chat=*/true, 32);
  second.join();
  for (int i = 0; i < 2; ++i) {
    const std::string model = i == 0 ? "chat" : "coder";
    SCOPED_TRACE(model);
    ASSERT_EQ(answers[i].status, 200) << Show(answers[i]);
    EXPECT_FALSE(answers[i].Finish().empty()) << "incomplete: " << Show(answers[i]);
    EXPECT_EQ(answers[i].Models(), "[\"" + model + "\"]") << Show(answers[i]);
    EXPECT_EQ(ActiveState(model + ".service"), "active");
    EXPECT_GE(MonotonicUs(model + ".service", "InactiveExitTimestampMonotonic"), answers[i].t0)
        << "not started by its request";
  }
  // At once: each request was sent before the other was answered.
  EXPECT_LT(answers[0].t0, answers[1].end);
  EXPECT_LT(answers[1].t0, answers[0].end);
  // And the port lists both.
  const std::string models = Get(port, "/v1/models");
  EXPECT_THAT(models, HasSubstr("\"chat\"")) << models;
  EXPECT_THAT(models, HasSubstr("\"coder\"")) << models;
  std::cout << "[ figures  ] chat: first byte after " << answers[0].WaitMs() << " ms, coder "
            << answers[1].WaitMs() << " ms\n";
}

// Behind the routed front too, a model that cannot load answers its request 503 naming the
// unit within a bound (the front passes the proxy's answer on, it does not hold it), and the
// next request starts it again, while the other model of the port serves.
TEST_F(RealOnDemandTest, BehindARoutedFrontAModelThatCannotLoadAnswers503) {
  MakeGguf("tiny");
  MakeGguf("cut", {"--truncate", "4096"});
  const int port = FreePort();
  OnDemandSvc good = Svc("chat", "tiny");
  OnDemandSvc bad = Svc("broken", "cut");
  good.port = bad.port = port;
  good.more = "    backend_port: " + std::to_string(FreePort()) + "\n";
  bad.more = "    backend_port: " + std::to_string(FreePort()) + "\n    preflight: {engine: off}\n";
  fronts_ = "/tmp/brf-" + std::to_string(::getpid()) + "-" + std::to_string(port);
  std::filesystem::create_directories(fronts_);
  const std::string m = Manifest({good, bad}, "  front_dir: " + fronts_ + "\nfronts:\n  " +
                                                  std::to_string(port) + ": {route: model}\n");
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  std::string last;
  for (int attempt = 1; attempt <= 2; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    Answer a = Stream(port, "broken");
    EXPECT_EQ(a.status, 503) << Show(a);
    EXPECT_THAT(a.Body(), HasSubstr("the model server broken.service did not start")) << Show(a);
    EXPECT_LT(a.TotalMs(), 30000u) << Show(a);
    const std::string invocation = Invocation("broken.service");
    EXPECT_THAT(invocation, Not(AnyOf("", "(unknown)")));
    EXPECT_NE(invocation, last) << "no new start of broken.service";
    last = invocation;
    std::cout << "[ figures  ] routed, attempt " << attempt << ": " << a.status << " after "
              << a.TotalMs() << " ms\n";
  }
  Answer ok = Stream(port, "chat");
  EXPECT_EQ(ok.status, 200) << Show(ok);
  EXPECT_EQ(ok.Models(), "[\"chat\"]") << Show(ok);
}

}  // namespace
}  // namespace berth::testing
