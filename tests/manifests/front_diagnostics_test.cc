// fronts: and the services behind them: every mistake at FILE:LINE:COL with what to do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "manifests/loader.h"
#include "tests/manifests/test_util.h"

namespace berth {
namespace {

using ::berth::testing::Problems;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr const char* kModels = R"(berth: 1
models:
  a: {source: hf://org/a}
)";

TEST(FrontDiagnostics, AFrontedServiceThatBindsAPublicAddressIsRefusedWhereItSaysSo) {
  EXPECT_THAT(Problems(std::string(kModels) + R"(fronts:
  8000: {hold: 5m}
services:
  s: {model: a, engine: vllm, gpus: [0], port: 8000, bind: 0.0.0.0}
)"),
              ElementsAre("berth.yaml:7:60: service 's' binds 0.0.0.0, but it is behind the front "
                          "of port 8000, and its backend listens on loopback (remove bind (the "
                          "front's bind: says where the public port listens))"));
}

TEST(FrontDiagnostics, BackendPortWithoutAFrontAndTakenBackendPortsAreRefused) {
  EXPECT_THAT(Problems(std::string(kModels) + R"(fronts:
  8000: {}
services:
  s: {model: a, engine: vllm, gpus: [0], port: 9000, backend_port: 20001}
  t: {model: a, engine: vllm, gpus: [1], port: 8000, backend_port: 9000, state: stopped}
)"),
              ElementsAre(HasSubstr("berth.yaml:7:68: 'backend_port' applies only to a service "
                                    "behind a front, and port 9000 has none"),
                          HasSubstr("berth.yaml:8:68: backend_port 9000 is already a public or "
                                    "backend port of this manifest")));
}

TEST(FrontDiagnostics, ARunningServiceWithoutEngineCannotBeBehindAFront) {
  EXPECT_THAT(Problems(R"(berth: 1
fronts:
  8000: {}
services:
  old: {port: 8000}
)"),
              ElementsAre(HasSubstr("berth.yaml:5:15: service 'old' runs on port 8000, which has "
                                    "a front, but berth does not write its unit")));
}

TEST(FrontDiagnostics, TheFrontsNamesAreBerths) {
  EXPECT_THAT(Problems(std::string(kModels) + R"(services:
  berth-front-1: {model: a, engine: vllm, gpus: [0], port: 8000}
)"),
              ElementsAre(HasSubstr("service name 'berth-front-1' begins with 'berth-front-', "
                                    "which berth keeps for the services of its fronts")));
}

TEST(FrontDiagnostics, AFrontDefinedInTwoFilesIsRefused) {
  LoadResult r = LoadManifestTexts({{"a.yaml", "berth: 1\nfronts: {8000: {}}\n"},
                                    {"b.yaml", "berth: 1\nfronts: {8000: {hold: 1m}}\n"}});
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_THAT(r.diagnostics[0].message,
              HasSubstr("the front of port 8000 is defined twice, first at a.yaml:2:10"));
}

TEST(FrontDiagnostics, AValidFrontLoadsWithItsDurations) {
  LoadResult r = LoadManifestTexts({{"berth.yaml", std::string(kModels) + R"(fronts:
  8000: {hold: 90s, drain: 10s, retry_after: 5s, bind: 127.0.0.1, ready: {path: /ready, lead: 2s}}
services:
  s: {model: a, engine: vllm, gpus: [0], port: 8000}
)"}});
  ASSERT_THAT(r.diagnostics, IsEmpty()) << r.diagnostics[0].message;
  const FrontDecl& f = r.desired.fronts.at(8000);
  EXPECT_EQ(f.hold_ms, 90000u);
  EXPECT_EQ(f.drain_ms, 10000u);
  EXPECT_EQ(f.retry_after_ms, 5000u);
  EXPECT_EQ(f.bind, "127.0.0.1");
  EXPECT_EQ(f.ready_path, "/ready");
  EXPECT_EQ(f.ready_lead_ms, 2000u);
  EXPECT_EQ(r.desired.services.at("berth-front-8000").bind, "127.0.0.1");
}

// The front's bind was pasted into HAProxy's `bind ADDRESS:PORT`: a port range listened on every
// port, a comma added listeners, unix@ or a path had HAProxy (root) create a socket anywhere.
// validate now refuses all of it, where it is written; tests/providers/front_haproxy_test.cc has
// HAProxy itself take every form accepted here.
TEST(FrontDiagnostics, ABindThatIsNotOneAddressIsRefusedWhereItIsWritten) {
  for (const char* bind :
       {"0.0.0.0:1-65535,0.0.0.0", "127.0.0.1:9001,127.0.0.2", "127.0.0.1:18000", "/tmp/x",
        "unix@/any/path", "abns@x", "fd@3", "ipv6@::1", "ipv4@0.0.0.0", "0.0.0.0 1.2.3.4", "[::1",
        "[127.0.0.1]", "-h", "a..b", "300.1.1.1", "127.1", "*", "exa_mple.com"}) {
    SCOPED_TRACE(bind);
    EXPECT_THAT(Problems(std::string(kModels) + "fronts:\n  8000: {bind: '" + bind + "'}\n"),
                ElementsAre(AllOf(HasSubstr("berth.yaml:5:16: front bind '"),
                                  HasSubstr("is not one IPv4 or IPv6 address or host name"),
                                  HasSubstr("the port is the front's key"))));
  }
  for (const char* bind : {"0.0.0.0", "127.0.0.1", "::", "::1", "[::1]", "localhost",
                           "gpu-01.example.com", "fe80::1"}) {
    SCOPED_TRACE(bind);
    EXPECT_THAT(Problems(std::string(kModels) + "fronts:\n  8000: {bind: '" + bind + "'}\n"),
                IsEmpty());
  }
}

}  // namespace
}  // namespace berth
