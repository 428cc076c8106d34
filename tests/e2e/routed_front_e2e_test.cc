// One port, several models, end to end (issue 41; docs/operating.md "One port, several models"):
// a front with `route: model` (a real HAProxy in berth-front-PORT on the sandboxed systemd) in
// front of two on-demand fake vLLMs of one swap group and one that runs all the time, as in
// manifests/examples/one-port. Each request reaches the server of its body's model (the fake
// vLLM answers 404 for a model it does not serve, so a misrouted request fails), a request for
// an idle model starts it and waits, its swap-group partner stops, GET /v1/models lists every
// model, an unknown one is answered 404 by the front, and another pass changes nothing.
#include <gmock/gmock.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "engine/cli/commands.h"
#include "providers/http/loopback.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

class RoutedFrontE2eTest : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(std::filesystem::exists("/usr/sbin/haproxy"))
        << "haproxy is not installed: .ci/setup --tests installs Debian's haproxy package";
    store_ = (tmp_ / "store").string();
    MakeModel(store_, "org/m", std::string(40, 'a'));
    port_ = FreePort();
    // Short: the front's sockets live there (108 bytes at most).
    fronts_ = "/tmp/bf-" + std::to_string(::getpid()) + "-" + std::to_string(port_);
    std::filesystem::create_directories(fronts_);
  }
  void TearDown() override {
    SandboxSuite::TearDown();
    std::error_code ec;
    std::filesystem::remove_all(fronts_, ec);
  }
  // A free port for `what` (a backend or a server port), the same when asked again: sandboxes
  // share the host's network, so ports berth would derive could collide between tests.
  int Port(const std::string& what) {
    auto [it, fresh] = ports_.emplace(what, 0);
    if (fresh) it->second = FreePort();
    return it->second;
  }
  // chat and coder on demand in swap group gpu0 (1 s load), embed running all the time; all on
  // the front's port, each by its served name.
  std::string Manifest(const std::string& embed_env = "") {
    std::ostringstream m;
    m << "berth: 1\nhost:\n  store: " << store_ << "\n  unit_dir: " << sandbox_->units_dir()
      << "\n  front_dir: " << fronts_ << "\n  executables: {vllm: " << FakeVllm()
      << ", berth: " << BERTH_BIN << "}\n"
      << "models:\n  m: {source: hf://org/m, revision: " << std::string(40, 'a') << "}\n"
      << "fronts:\n  " << port_ << ": {route: model}\n"
      << "services:\n";
    for (const std::string name : {"chat", "coder", "embed"}) {
      m << "  " << name << ":\n    model: m\n    engine: vllm\n    gpus: [0]\n    port: " << port_
        << "\n    backend_port: " << Port(name) << "\n    preflight: {engine: off}\n"
        << "    health: {timeout: 30s, interval: 100ms}\n"
        << "    vllm: {served_model_name: " << name << ", gpu_memory_utilization: 0.3}\n"
        << "    env: {FAKE_VLLM_STARTUP_DELAY: '1'"
        << (std::string(name) == "embed" ? embed_env : "") << "}\n";
      if (std::string(name) != "embed")
        m << "    on_demand: true\n    swap_group: gpu0\n    idle_stop: 1m\n    server_port: "
          << Port(std::string(name) + "-server") << "\n";
    }
    std::string path = (tmp_ / "berth.yaml").string();
    std::ofstream(path) << m.str();
    return path;
  }
  int Apply(const std::string& manifest) { return ApplyIn(manifest, out_, err_); }
  LoopbackAnswer Request(const std::string& method, const std::string& path,
                         const std::string& body = "") {
    LoopbackLimits limits;
    limits.connect_timeout_ms = 5000;
    limits.total_timeout_ms = 60000;
    return LoopbackRequest(method, LoopbackUrl("127.0.0.1", port_, path), body, limits);
  }
  // A completion for `model` through the front.
  LoopbackAnswer Complete(const std::string& model) {
    return Request("POST", "/v1/completions",
                   R"({"model": ")" + model + R"(", "prompt": "hi", "max_tokens": 4})");
  }
  // The model that answered a completion (its body's `model`), or what went wrong.
  static std::string AnsweredBy(const LoopbackAnswer& a) {
    auto j = nlohmann::json::parse(a.body, nullptr, false);
    if (a.status != 200 || j.is_discarded() || !j.contains("model"))
      return std::to_string(a.status) + " " + a.body + a.error;
    return j["model"].get<std::string>();
  }
  std::string Invocation(const std::string& unit) {
    auto units = systemd_->GetUnits({unit});
    return units.ok() && !units->empty() ? (*units)[0].invocation_id : "(unknown)";
  }

  std::string store_, fronts_;
  int port_ = 0;
  std::map<std::string, int> ports_;
  std::ostringstream out_, err_;
};

TEST_F(RoutedFrontE2eTest, ThreeModelsOnOnePortEachRequestServedByItsModel) {
  const std::string m = Manifest();
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  const std::string front = "berth-front-" + std::to_string(port_) + ".service";
  EXPECT_EQ(ActiveState(front), "active");
  EXPECT_EQ(ActiveState("embed.service"), "active");
  EXPECT_EQ(ActiveState("chat.service"), "inactive");  // on demand: no request yet
  EXPECT_EQ(ActiveState("coder.service"), "inactive");

  // Every model of the port, running or not, from the front itself.
  LoopbackAnswer list = Request("GET", "/v1/models");
  ASSERT_EQ(list.status, 200) << list.body << list.error;
  std::vector<std::string> ids;
  const nlohmann::json listed = nlohmann::json::parse(list.body, nullptr, false);
  if (listed.is_object() && listed.contains("data") && listed["data"].is_array())
    for (const auto& e : listed["data"]) ids.push_back(e.value("id", ""));
  EXPECT_THAT(ids, UnorderedElementsAre("chat", "coder", "embed")) << list.body;

  // chat (idle: started by this request, which waits) and embed (running) at once.
  LoopbackAnswer chat, embed;
  std::thread t([&] { chat = Complete("chat"); });
  embed = Complete("embed");
  t.join();
  EXPECT_EQ(AnsweredBy(chat), "chat");
  EXPECT_EQ(AnsweredBy(embed), "embed");
  EXPECT_GE(chat.elapsed_ms, 1000u) << "chat's server loads for 1 s";
  EXPECT_EQ(ActiveState("chat.service"), "active");

  // coder takes chat's turn on the GPU: chat stops, coder answers.
  LoopbackAnswer coder = Complete("coder");
  EXPECT_EQ(AnsweredBy(coder), "coder");
  EXPECT_EQ(ActiveState("coder.service"), "active");
  EXPECT_NE(ActiveState("chat.service"), "active");

  // A model the port does not serve: the front answers, no server is asked.
  LoopbackAnswer unknown = Complete("gpt-4o");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_THAT(unknown.body, HasSubstr("model_not_found"));
  EXPECT_THAT(unknown.body, HasSubstr("The model `gpt-4o` does not exist. This port serves"));

  // Another pass leaves it all as it is: nothing restarts, the idle chat is not "repaired".
  const std::map<std::string, std::string> before = {
      {front, Invocation(front)},
      {"embed.service", Invocation("embed.service")},
      {"coder.service", Invocation("coder.service")}};
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("No changes")) << out_.str();
  for (const auto& [unit, id] : before) EXPECT_EQ(Invocation(unit), id) << unit;
  EXPECT_NE(ActiveState("chat.service"), "active");
  std::cout << "[ figures  ] chat's first request " << chat.elapsed_ms << " ms (load 1 s), embed "
            << embed.elapsed_ms << " ms meanwhile, coder (swap) " << coder.elapsed_ms << " ms\n";
}

TEST_F(RoutedFrontE2eTest, ARunningModelsRestartHoldsItsRequestsAndLeavesTheOthersServed) {
  ASSERT_EQ(Apply(Manifest()), kExitOk) << out_.str() << err_.str();
  LoopbackAnswer warm = Complete("chat");
  ASSERT_EQ(AnsweredBy(warm), "chat");
  const std::string chat = Invocation("chat.service");
  // Requests for embed and chat every 50 ms while embed's unit changes and it restarts in place
  // (its server loads for 1 s): embed's wait at the front, chat's are served throughout.
  std::atomic<bool> done{false};
  std::vector<LoopbackAnswer> embeds, chats;
  std::thread client([&] {
    while (!done) {
      std::thread e([&] { embeds.push_back(Complete("embed")); });
      chats.push_back(Complete("chat"));
      e.join();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const int applied = Apply(Manifest(", FAKE_VLLM_CHANGED: '1'"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  done = true;
  client.join();
  ASSERT_EQ(applied, kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("held up to 10m, not refused")) << out_.str();
  // At least one request came while embed was away (its server loads for 1 s) and waited.
  EXPECT_GE(embeds.size(), 2u);
  uint64_t longest = 0;
  for (const LoopbackAnswer& a : embeds) {
    EXPECT_EQ(AnsweredBy(a), "embed");
    longest = std::max(longest, a.elapsed_ms);
  }
  EXPECT_GE(longest, 1000u) << "no request for embed came while it restarted";
  for (const LoopbackAnswer& a : chats) EXPECT_EQ(AnsweredBy(a), "chat");
  EXPECT_EQ(Invocation("chat.service"), chat);
  std::cout << "[ figures  ] " << embeds.size() << " requests for embed during its restart, the "
            << "longest " << longest << " ms; " << chats.size() << " for chat\n";
}

}  // namespace
}  // namespace berth::testing
