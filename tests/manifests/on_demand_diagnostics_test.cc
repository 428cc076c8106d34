// on_demand, idle_stop, swap_group and server_port: every mistake at FILE:LINE:COL, and what a
// valid on-demand service becomes (its server on a loopback port, the socket on its port).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "manifests/loader.h"
#include "tests/manifests/test_util.h"

namespace berth {
namespace {

using ::berth::testing::Problems;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kModels = R"(berth: 1
models:
  a: {source: hf://org/a}
)";

TEST(OnDemandDiagnostics, TheOnDemandKeysWithoutOnDemandAreRefusedWhereTheyAreWritten) {
  EXPECT_THAT(Problems(std::string(kModels) + R"(services:
  s: {model: a, engine: vllm, gpus: [0], port: 8000, idle_stop: 2m, swap_group: g, server_port: 9}
)"),
              ElementsAre(HasSubstr("berth.yaml:5:65: 'idle_stop' applies only to an on-demand "
                                    "service"),
                          HasSubstr("berth.yaml:5:81: 'swap_group' applies only to on-demand "
                                    "services"),
                          HasSubstr("berth.yaml:5:97: 'server_port' applies only to an "
                                    "on-demand service")));
}

TEST(OnDemandDiagnostics, OnDemandNeedsAnEnginePortNoGatesAndNoFront) {
  EXPECT_THAT(Problems(std::string(kModels) + R"(fronts:
  8001: {}
services:
  s: {state: stopped, on_demand: true}
  t: {model: a, engine: vllm, gpus: [0], port: 8001, on_demand: true}
  u: {model: a, engine: vllm, gpus: [0], port: 8002, on_demand: true, gates: {smoke: {}}}
  v: {model: a, engine: vllm, gpus: [0], port: 8003, on_demand: true, idle_stop: 500ms}
)"),
              ElementsAre(HasSubstr("berth.yaml:7:23: 'on_demand' needs an engine"),
                          HasSubstr("berth.yaml:8:65: service 't' is on demand on port 8001, "
                                    "whose front switches one service at a time"),
                          HasSubstr("berth.yaml:9:3: gates need a start by berth"),
                          HasSubstr("berth.yaml:10:82: idle_stop must be at least 1s")));
}

TEST(OnDemandDiagnostics, AnOnDemandServerListensOnLoopbackAndItsSocketOnThePort) {
  LoadResult r = ::berth::testing::Load(std::string(kModels) + R"(services:
  s: {model: a, engine: vllm, gpus: [0], port: 8000, on_demand: true, swap_group: g}
  t: {model: a, engine: vllm, gpus: [0], port: 8001, on_demand: true, swap_group: g,
      server_port: 20500, idle_stop: 2s}
)");
  ASSERT_THAT(r.diagnostics, IsEmpty());
  const ServiceSpec& s = r.desired.services.at("s");
  ASSERT_TRUE(s.on_demand);
  EXPECT_EQ(s.on_demand->public_port, 8000);
  EXPECT_EQ(s.on_demand->idle_stop_ms, 600000u);
  EXPECT_GE(*s.port, 20000);
  EXPECT_LE(*s.port, 29999);
  EXPECT_EQ(s.bind, "127.0.0.1");
  const ServiceSpec& t = r.desired.services.at("t");
  EXPECT_EQ(*t.port, 20500);
  EXPECT_EQ(t.on_demand->idle_stop_ms, 2000u);
  EXPECT_EQ(t.on_demand->swap_group, "g");
}

TEST(OnDemandDiagnostics, BehindAFrontThatRoutesByModelEveryServiceOfThePortIsServedAtOnce) {
  LoadResult r = ::berth::testing::Load(std::string(kModels) + R"(fronts:
  8000: {route: model}
services:
  chat: {model: a, engine: vllm, gpus: [0], port: 8000, on_demand: true, swap_group: g,
         vllm: {served_model_name: chat-v1}}
  coder: {model: a, engine: vllm, gpus: [0], port: 8000, on_demand: true, swap_group: g}
  embed: {model: a, engine: vllm, gpus: [1], port: 8000}
  old: {model: a, engine: vllm, gpus: [1], port: 8000, state: stopped,
        vllm: {served_model_name: chat-v1}}
)");
  ASSERT_THAT(r.diagnostics, IsEmpty());
  EXPECT_TRUE(r.desired.fronts.at(8000).route_by_model);
  const ServiceSpec& chat = r.desired.services.at("chat");
  EXPECT_EQ(chat.routed_port, 8000);
  EXPECT_EQ(chat.front_port, 0);  // never switched with the port's other services
  EXPECT_EQ(chat.PublicPort(), 8000);
  ASSERT_TRUE(chat.on_demand);
  // The socket holds the backend port the front routes chat-v1 to, on loopback; the server
  // listens on a port of its own behind it.
  EXPECT_GE(chat.on_demand->public_port, 20000);
  EXPECT_LE(chat.on_demand->public_port, 29999);
  EXPECT_EQ(chat.on_demand->bind, "127.0.0.1");
  EXPECT_NE(*chat.port, chat.on_demand->public_port);
  EXPECT_EQ(chat.bind, "127.0.0.1");
  const ServiceSpec& embed = r.desired.services.at("embed");
  EXPECT_EQ(embed.routed_port, 8000);
  EXPECT_FALSE(embed.on_demand);
  EXPECT_GE(*embed.port, 20000);
  EXPECT_EQ(embed.bind, "127.0.0.1");
  EXPECT_EQ(embed.PublicPort(), 8000);
}

TEST(OnDemandDiagnostics, ARoutedFrontRefusesTwoRunningServicesOfOneModelNameAndStandbySleep) {
  EXPECT_THAT(Problems(std::string(kModels) + R"(fronts:
  8000: {route: model}
  8001: {route: name}
services:
  chat: {model: a, engine: vllm, gpus: [0], port: 8000}
  chat2: {model: a, engine: vllm, gpus: [1], port: 8000, vllm: {served_model_name: chat}}
  sleepy: {model: a, engine: vllm, gpus: [2], port: 8000, standby: sleep}
)"),
              ElementsAre(HasSubstr("berth.yaml:6:17: a front routes by 'model' or not at all, "
                                    "not 'name'"),
                          HasSubstr("berth.yaml:9:52: service 'chat2' serves model 'chat' on port "
                                    "8000, as does running service 'chat' at berth.yaml:8:51"),
                          HasSubstr("berth.yaml:10:68: service 'sleepy' has standby: sleep on port "
                                    "8000, whose front routes by model")));
}

TEST(OnDemandDiagnostics, ARoutedFrontRefusesAServedNameItCannotMatch) {
  EXPECT_THAT(Problems(std::string(kModels) + R"(fronts:
  8000: {route: model}
services:
  a: {model: a, engine: vllm, gpus: [0], port: 8000, vllm: {served_model_name: "123"}}
  b: {model: a, engine: vllm, gpus: [1], port: 8000, vllm: {served_model_name: "\u00e9'x"}}
  c: {model: a, engine: vllm, gpus: [2], port: 8001, vllm: {served_model_name: "123"}}
)"),
              ElementsAre(HasSubstr("berth.yaml:7:48: service 'a' is served on port 8000, whose "
                                    "front routes by model, as '123', which is a JSON number"),
                          HasSubstr("berth.yaml:8:48: service 'b' is served on port 8000, whose "
                                    "front routes by model, as '\u00e9'x', which "
                                    "is not printable ASCII")));
}

}  // namespace
}  // namespace berth
