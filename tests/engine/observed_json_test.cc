#include "engine/core/observed_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace berth {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ObservedJson, TheSeedObservationRoundTripsByteForByte) {
  std::string path =
      std::string(BERTH_SOURCE_DIR) + "/manifests/examples/blackwell-8x/observed.json";
  std::string text = ReadFile(path);
  Result<Observed> o = ObservedFromJson(text, path);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->hostname, "blackwell-01");
  ASSERT_EQ(o->gpus.size(), 8u);
  EXPECT_EQ(o->gpus[3].processes[0].unit, "vllm-kimi-k25.service");
  EXPECT_EQ(o->store.free_bytes, 1'200'000'000'000u);
  ASSERT_NE(o->FindUnit("vllm-kimi-k25.service"), nullptr);
  EXPECT_TRUE(o->FindUnit("vllm-kimi-k25.service")->IsActive());
  EXPECT_EQ(ObservedToJson(*o), text);
}

TEST(ObservedJson, AModelsConfigAndWeightsRoundTrip) {
  Observed o;
  o.hostname = "h";
  ObservedRevision good{"c", {"main"}, true, 30, 30, std::nullopt, std::nullopt};
  good.config = ModelConfig{{"MiniMaxM2ForCausalLM"}, ""};
  good.weights_bytes = 230'000'000'000;
  ObservedRevision bad{"d", {}, true, 3, 3, std::nullopt, std::nullopt};
  bad.config = ModelConfig{{}, "is not JSON"};
  o.store = {"/m", true, 10, 5, {{"a/b", {good, bad}}}};
  std::string text = ObservedToJson(o);
  Result<Observed> back = ObservedFromJson(text, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  const auto& revs = back->store.repos[0].revisions;
  ASSERT_TRUE(revs[0].config.has_value());
  EXPECT_EQ(revs[0].config->architectures, std::vector<std::string>{"MiniMaxM2ForCausalLM"});
  EXPECT_EQ(revs[0].weights_bytes, 230'000'000'000u);
  EXPECT_EQ(revs[1].config->problem, "is not JSON");
  EXPECT_FALSE(revs[1].weights_bytes.has_value());
  EXPECT_EQ(ObservedToJson(*back), text);
}

TEST(ObservedJson, EverySectionRoundTrips) {
  Observed o;
  o.hostname = "h";
  o.store = {
      "/m", true, 10, 5, {{"a/b", {{"c", {"main"}, false, 3, 9, std::nullopt, std::nullopt}}}}};
  o.gpus_known = false;
  o.gpu_error = "NVML not found";
  o.units.push_back({"x.service",
                     "loaded",
                     "active",
                     "running",
                     "/etc/x",
                     "h1",
                     true,
                     "",
                     "h2",
                     "[Service]\n",
                     42,
                     true,
                     {"/etc/x.d/a.conf"},
                     "enabled",
                     "ab12",
                     2,
                     "exit-code",
                     3});
  o.ports.push_back({8000, "::", 42, "vllm", "x.service"});
  o.hub.push_back({"a/b", "main", "c", {{"f", 1}}});
  o.state.serial = 7;
  o.state.units = {"x.service"};
  o.state.models["a/b"] = {"c"};
  o.state.failures["service/x"] = {"2026-12-01T00:00:00Z", "did not become healthy"};
  o.state.interrupted = "an apply started ... stopped at step 2";
  o.state.ungated = {"service/x"};
  o.state.learned["kimi.service"] = {{8000}, {{0, 75'000'000'000}, {3, 5}}};
  o.state.start_times_ms["x.service"] = {38'000, 47'000};
  std::string once = ObservedToJson(o);
  Result<Observed> back = ObservedFromJson(once, "t");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ObservedToJson(*back), once);
  EXPECT_FALSE(back->gpus_known);
  EXPECT_EQ(back->state.failures.at("service/x").message, "did not become healthy");
  EXPECT_EQ(back->state.interrupted, o.state.interrupted);
  EXPECT_EQ(back->state.ungated, o.state.ungated);
  EXPECT_EQ(back->state.learned, o.state.learned);
  EXPECT_EQ(back->state.start_times_ms, o.state.start_times_ms);
  EXPECT_EQ(back->store.repos[0].revisions[0].bytes_total, 9u);
}

TEST(ObservedJson, ATypoIsAnErrorNamingWhere) {
  Result<Observed> o =
      ObservedFromJson(R"({"format_version": 1, "store": {"free_byte": 5}})", "host.json");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().message(), "host.json: store: unknown key 'free_byte'");
}

TEST(ObservedJson, ALearnedGpuThatIsNotAnIndexIsRefused) {
  auto bad = ObservedFromJson(
      R"({"format_version": 1, "berth_state": {"learned": {"k.service": {"gpu_bytes": {"x": 1}}}}})",
      "h");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "h: berth_state.learned.k.service.gpu_bytes: 'x' is not a GPU index");
}

TEST(ObservedJson, AStartTimeThatIsNotMillisecondsIsRefused) {
  for (const char* value : {"-5", "1.5", "\"42s\""}) {
    auto bad = ObservedFromJson(
        std::string(R"({"format_version": 1, "berth_state": {"start_times_ms": {"k.service": [)") +
            value + "]}}}",
        "h");
    ASSERT_FALSE(bad.ok()) << value;
    EXPECT_EQ(bad.status().message(), std::string("h: berth_state.start_times_ms.k.service: '") +
                                          value + "' is not a count of milliseconds");
  }
}

TEST(ObservedJson, WrongTypesAndVersionsAreRefused) {
  auto bad_type =
      ObservedFromJson(R"({"format_version": 1, "gpus": {"devices": [{"index": "0"}]}})", "h");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_THAT(bad_type.status().message(), HasSubstr("gpus.devices[0].index: wrong type"));
  auto bad_version = ObservedFromJson(R"({"format_version": 2})", "h");
  ASSERT_FALSE(bad_version.ok());
  EXPECT_THAT(bad_version.status().message(), HasSubstr("format_version 2 is not supported"));
  auto not_json = ObservedFromJson("{", "h");
  ASSERT_FALSE(not_json.ok());
  EXPECT_THAT(not_json.status().message(), HasSubstr("h: not valid JSON"));
}

}  // namespace
}  // namespace berth
