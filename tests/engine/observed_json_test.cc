#include "core/observed_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "engine/cli/commands.h"
#include "engine/cli/live_host.h"
#include "engine/output/observed_text.h"
#include "providers/saved/saved_observer.h"

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
  ObservedRevision good{"c",          {"main"},     true,         30,          30,
                        std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  good.config = ModelConfig{{"MiniMaxM2ForCausalLM"}, "", "minimax_m2"};
  good.weights_bytes = 230'000'000'000;
  ObservedRevision bad{"d", {}, true, 3, 3, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  bad.gguf = std::map<std::string, GgufHeader>{
      {"Q4/m.gguf", {3, "llama", "", std::nullopt}},
      {"x.gguf", {0, "", "is not a GGUF file (...)", std::nullopt}}};
  bad.config = ModelConfig{{}, "is not JSON"};
  o.store = {"/m", true, 10, 5, {{"a/b", {good, bad}}}};
  std::string text = ObservedToJson(o);
  Result<Observed> back = ObservedFromJson(text, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  const auto& revs = back->store.repos[0].revisions;
  ASSERT_TRUE(revs[0].config.has_value());
  EXPECT_EQ(revs[0].config->architectures, std::vector<std::string>{"MiniMaxM2ForCausalLM"});
  EXPECT_EQ(revs[0].config->model_type, "minimax_m2");
  EXPECT_EQ(revs[0].weights_bytes, 230'000'000'000u);
  EXPECT_EQ(revs[1].config->problem, "is not JSON");
  EXPECT_EQ(revs[1].config->model_type, "");
  EXPECT_FALSE(revs[1].weights_bytes.has_value());
  EXPECT_FALSE(revs[0].gguf.has_value());
  ASSERT_TRUE(revs[1].gguf.has_value());
  EXPECT_EQ(*revs[1].gguf, *bad.gguf);
  EXPECT_EQ(ObservedToJson(*back), text);

  // A saved observation is bounded like the file it was read from.
  std::string at = "\"model_type\": \"minimax_m2\"";
  size_t pos = text.find(at);
  ASSERT_NE(pos, std::string::npos) << text;
  std::string huge = text;
  huge.replace(pos, at.size(), "\"model_type\": \"" + std::string(101, 'x') + "\"");
  Result<Observed> refused = ObservedFromJson(huge, "test");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("model_type: longer than 100"));
}

// A GGUF file's figures (what a llama-server's claim is derived from) survive a saved
// observation, and a hand-edited one whose lists do not hold together is refused.
TEST(ObservedJson, AGgufModelsFiguresRoundTripAndInconsistentOnesAreRefused) {
  Observed o;
  ObservedRevision rev{"c", {}, true, 3, 3, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  GgufModel m;
  m.architecture = "llama";
  m.block_count = 2;
  m.context_length = 4096;
  m.embedding_length = 256;
  m.head_count = 4;
  m.head_count_kv = {2, 1};
  m.vocab_size = 32000;
  m.input_bytes = 100;
  m.output_bytes = 200;
  m.block_bytes = {300, 400};
  rev.gguf = std::map<std::string, GgufHeader>{{"m.gguf", {3, "llama", "", m}}};
  o.store = {"/m", true, 10, 5, {{"a/b", {rev}}}};
  std::string text = ObservedToJson(o);
  Result<Observed> back = ObservedFromJson(text, "test");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->store.repos[0].revisions[0].gguf->at("m.gguf").model, m);
  EXPECT_EQ(ObservedToJson(*back), text);
  for (auto [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"block_bytes\": [\n", "\"block_bytes\": [\n1,\n"},
           {"\"head_count_kv\": [\n", "\"head_count_kv\": [\n-1,\n"}}) {
    std::string bad = text;
    size_t at = bad.find(from);
    ASSERT_NE(at, std::string::npos) << text;
    bad.replace(at, from.size(), to);
    EXPECT_FALSE(ObservedFromJson(bad, "test").ok()) << to;
  }
}

// docs/observed-json.md shows a document with every section: it must be what berth reads.
TEST(ObservedJsonDoc, TheDocumentedExampleIsValidInput) {
  std::string path = std::string(BERTH_SOURCE_DIR) + "/docs/observed-json.md";
  std::string doc = ReadFile(path);
  size_t begin = doc.find("```json\n");
  ASSERT_NE(begin, std::string::npos) << path << " has no ```json example";
  begin += 8;
  size_t end = doc.find("```", begin);
  ASSERT_NE(end, std::string::npos);
  Result<Observed> o = ObservedFromJson(doc.substr(begin, end - begin), path);
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->hostname, "gpu-01");
  ASSERT_NE(o->FindUnit("chat.service"), nullptr);
  EXPECT_EQ(o->ports.size(), 1u);
  EXPECT_EQ(o->state.start_times_ms.at("chat.service").size(), 3u);
  EXPECT_EQ(o->state.learned.count("vllm-kimi-k25.service"), 1u);
}

TEST(ObservedJson, EverySectionRoundTrips) {
  Observed o;
  o.hostname = "h";
  o.store = {
      "/m",
      true,
      10,
      5,
      {{"a/b",
        {{"c", {"main"}, false, 3, 9, std::nullopt, std::nullopt, std::nullopt, std::nullopt}}}}};
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
                     "",
                     42,
                     true,
                     {"/etc/x.d/a.conf"},
                     "enabled",
                     "ab12",
                     2,
                     "exit-code",
                     3});
  o.units.back().last_start_ms = 3200;
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
  o.state.stop_times_ms["x.service"] = {30'020};
  o.state.start_invocations["x.service"] = "ab12";
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
  EXPECT_EQ(back->state.stop_times_ms, o.state.stop_times_ms);
  EXPECT_EQ(back->state.start_invocations, o.state.start_invocations);
  EXPECT_EQ(back->units[0].last_start_ms, 3200u);
  EXPECT_EQ(back->store.repos[0].revisions[0].bytes_total, 9u);
}

TEST(ObservedJson, ALastStartOfMoreThanADayOrNotMillisecondsIsRefused) {
  auto unit = [](const std::string& ms) {
    return ObservedFromJson(R"({"format_version": 1, "units": {"items": [{"name": "x.service", )"
                            R"("last_start_ms": )" +
                                ms + "}]}}",
                            "h");
  };
  ASSERT_TRUE(unit("86400000").ok()) << unit("86400000").status().message();
  EXPECT_EQ(unit("86400000")->units[0].last_start_ms, kMaxStartMs);
  EXPECT_EQ(unit("86400001").status().message(),
            "h: units.items[0].last_start_ms: 86400001 is more than a day (86400000 ms), not a "
            "start's time");
  for (const char* bad : {"-1", "1.5", "\"3s\"", "true"}) EXPECT_FALSE(unit(bad).ok()) << bad;
  // Left out: not known.
  auto none = ObservedFromJson(
      R"({"format_version": 1, "units": {"items": [{"name": "x.service"}]}})", "h");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->units[0].last_start_ms);
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

// A number past a double's range threw nlohmann's out_of_range, which nothing caught: berth plan
// --observed aborted (SIGABRT). So did nesting 60,000 deep (a stack overflow in the parser).
TEST(ObservedJson, ANumberPastADoubleOrNestingTooDeepIsNotValidJsonNotACrash) {
  for (const std::string& number : {std::string("1e400"), std::string(100000, '9')}) {
    auto r = ObservedFromJson(R"({"format_version": 1, "hostname": )" + number + "}", "h.json");
    ASSERT_FALSE(r.ok()) << number.size();
    EXPECT_THAT(r.status().message(), HasSubstr("h.json: not valid JSON"));
    EXPECT_THAT(r.status().message(), HasSubstr("number overflow"));
    EXPECT_LT(r.status().message().size(), 400u) << "the number is quoted, not copied whole";
  }
  auto deep = ObservedFromJson(
      R"({"format_version": 1, "x": )" + std::string(60000, '[') + std::string(60000, ']') + "}",
      "h.json");
  ASSERT_FALSE(deep.ok());
  EXPECT_THAT(deep.status().message(), HasSubstr("h.json: not valid JSON: nested deeper than"));
}

// A hand-written unit's text travels with the observation (the diff an adopt shows is made
// from it); so does the reason a text is missing, and an empty hand-written file stays empty.
TEST(ObservedJson, HandWrittenUnitTextAndWhyItIsMissingRoundTrip) {
  Observed o;
  auto unit = [&](const std::string& name, const std::string& content, const std::string& note) {
    ObservedUnit u;
    u.name = name;
    u.load_state = "loaded";
    u.fragment_path = "/etc/systemd/system/" + name;
    u.content_hash = "h";
    u.content = content;
    u.content_note = note;
    o.units.push_back(u);
  };
  unit("hand.service", "[Service]\nExecStart=/opt/x\x1b[2J\n", "");
  unit("big.service", "", "the file is larger than 64 KiB (70000 bytes)");
  unit("empty.service", "", "");
  std::string once = ObservedToJson(o);
  Result<Observed> back = ObservedFromJson(once, "t");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(ObservedToJson(*back), once);
  EXPECT_EQ(back->FindUnit("hand.service")->content, o.units[0].content);
  EXPECT_EQ(back->FindUnit("big.service")->content_note, o.units[1].content_note);
  EXPECT_EQ(back->FindUnit("empty.service")->content_note, "");
}

// An observation that does not carry a hand-written unit's text (an older berth's, or written
// by hand) does not pass for an empty file.
TEST(ObservedJson, AHandWrittenUnitWithoutItsTextIsNotTakenForAnEmptyFile) {
  auto o = ObservedFromJson(R"({"format_version": 1, "units": {"items": [
      {"name": "x.service", "fragment_path": "/etc/systemd/system/x.service",
       "content_hash": "h", "managed": false}]}})",
                            "h");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_EQ(o->units[0].content_note, "this observation does not carry the file's text");
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

// A saved observation's front files: round trip, and keys that are not ports are refused, not
// thrown (a huge number, a sign, trailing text, an empty key).
TEST(ObservedJsonFronts, FrontConfigsRoundTripAndBadPortKeysAreRefused) {
  Observed o;
  o.front_configs[8000] = "# berth-front-active: svc-a\nglobal\n";
  std::string text = ObservedToJson(o);
  Result<Observed> back = ObservedFromJson(text, "o.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->front_configs, o.front_configs);
  for (const char* key : {"99999999999999999999", "-1", "80x", "", "0", "65536"}) {
    std::string bad = text;
    bad.replace(bad.find("\"8000\""), 6, std::string("\"") + key + "\"");
    Result<Observed> r = ObservedFromJson(bad, "o.json");
    EXPECT_FALSE(r.ok()) << key;
    if (!r.ok()) {
      EXPECT_THAT(r.status().message(), ::testing::HasSubstr("is not a port")) << key;
    }
  }
}

// Host memory and the page cache's share of a revision's weights (prewarm) round-trip; an
// observation without them (saved before) reads as not observed; an impossible one is refused.
TEST(ObservedJsonMemory, MemoryAndResidencyRoundTripAndAreChecked) {
  Observed o;
  o.hostname = "h";
  ObservedRevision rev{"c",          {"main"},     true,         30,          30,
                       std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  rev.weights_bytes = 20;
  rev.resident_bytes = 12;
  o.store.repos.push_back({"org/a", {rev}});
  o.memory.known = true;
  o.memory.total_bytes = 2'000'000;
  o.memory.available_bytes = 1'500'000;
  std::string text = ObservedToJson(o);
  EXPECT_THAT(text, HasSubstr("\"resident_bytes\": 12"));
  Result<Observed> back = ObservedFromJson(text, "o.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->memory.known);
  EXPECT_EQ(back->memory.total_bytes, 2'000'000u);
  EXPECT_EQ(back->memory.available_bytes, 1'500'000u);
  EXPECT_EQ(back->store.repos[0].revisions[0].resident_bytes, std::optional<uint64_t>(12));
  EXPECT_EQ(ObservedToJson(*back), text);

  // Not observed, and why: kept; nothing observed and nothing to say: not written at all.
  o.memory = {};
  o.memory.error = "/proc/meminfo: no MemAvailable line";
  back = ObservedFromJson(ObservedToJson(o), "o.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_FALSE(back->memory.known);
  EXPECT_EQ(back->memory.error, "/proc/meminfo: no MemAvailable line");
  o.memory = {};
  EXPECT_THAT(ObservedToJson(o), ::testing::Not(HasSubstr("\"memory\"")));

  auto refused = [](const std::string& memory) {
    Result<Observed> r = ObservedFromJson(
        "{\"format_version\": 1, \"hostname\": \"h\", \"memory\": " + memory + "}", "o.json");
    return r.ok() ? std::string("accepted") : r.status().message();
  };
  EXPECT_THAT(refused("{\"known\": true, \"total_bytes\": 10, \"available_bytes\": 11}"),
              HasSubstr("memory.available_bytes: more than memory.total_bytes"));
  EXPECT_THAT(refused("{\"known\": true, \"free\": 1}"), HasSubstr("memory: unknown key 'free'"));
  EXPECT_THAT(refused("{\"known\": \"yes\"}"), HasSubstr("memory.known: wrong type"));
  EXPECT_THAT(refused("[1]"), HasSubstr("memory: expected an object"));
  EXPECT_THAT(refused("{\"known\": true, \"total_bytes\": -1, \"available_bytes\": 5}"),
              HasSubstr("memory.total_bytes: expected a number of bytes"));
  EXPECT_THAT(refused("{\"known\": true, \"total_bytes\": 1e30, \"available_bytes\": 1}"),
              HasSubstr("memory.total_bytes: expected a number of bytes"));
  EXPECT_THAT(refused("{\"known\": true, \"total_bytes\": 10, \"available_bytes\": 2.5}"),
              HasSubstr("memory.available_bytes: expected a number of bytes"));
}

// An integer field takes an integer in its range: nothing is truncated, wrapped or taken from a
// boolean (a PID of 3,000,000,000 became a negative one; 1e23 was undefined behaviour).
TEST(ObservedJson, AnIntegerFieldRefusesFloatsBooleansAndValuesOutOfItsRange) {
  auto read = [](const std::string& unit_extra) {
    return ObservedFromJson(
        R"({"format_version": 1, "units": {"items": [{"name": "u.service", )" + unit_extra + "}]}}",
        "o.json");
  };
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"("main_pid": 1.5)", "units.items[0].main_pid: wrong type (number)"},
      {R"("main_pid": 99999999999999999999999)", "units.items[0].main_pid: wrong type (number)"},
      {R"("main_pid": true)", "units.items[0].main_pid: wrong type (boolean)"},
      {R"("main_pid": 3000000000)", "units.items[0].main_pid: 3000000000 is out of range"},
      {R"("n_restarts": -1)", "units.items[0].n_restarts: -1 is out of range"},
      {R"("n_restarts": 4294967296)", "units.items[0].n_restarts: 4294967296 is out of range"},
      {R"("active_enter_usec": -1)", "units.items[0].active_enter_usec: -1 is out of range"},
      {R"("timeout_stop_usec": 1.5)", "units.items[0].timeout_stop_usec: wrong type (number)"},
  };
  for (const auto& [extra, words] : refused) {
    Result<Observed> o = read(extra);
    ASSERT_FALSE(o.ok()) << extra;
    EXPECT_THAT(o.status().message(), HasSubstr(words)) << extra;
  }
  Result<Observed> edges =
      read(R"("main_pid": 2147483647, "exec_main_status": -2147483648, "n_restarts": 4294967295, )"
           R"("active_enter_usec": 18446744073709551615)");
  ASSERT_TRUE(edges.ok()) << edges.status().message();
  EXPECT_EQ(edges->units[0].main_pid, 2147483647);
  EXPECT_EQ(edges->units[0].exec_main_status, -2147483647 - 1);
  EXPECT_EQ(edges->units[0].n_restarts, 4294967295u);
  EXPECT_EQ(edges->units[0].active_enter_usec, 18446744073709551615ull);
}

// SavedObserver reads on a thread of its own: the first Observe takes that read, a second
// reads the file again, one never asked is dropped without waiting on it forever, and a file
// that is not there says what to do.
TEST(SavedObserverTest, ReadsAheadThenAgainAndSaysWhenTheFileIsMissing) {
  std::string path =
      std::string(BERTH_SOURCE_DIR) + "/manifests/examples/blackwell-8x/observed.json";
  std::string text = ReadFile(path);
  Desired d;
  {
    SavedObserver saved(path);
    Result<Observed> first = saved.Observe(d);
    ASSERT_TRUE(first.ok()) << first.status().message();
    EXPECT_EQ(ObservedToJson(*first), text);
    Result<Observed> second = saved.Observe(d);
    ASSERT_TRUE(second.ok()) << second.status().message();
    EXPECT_EQ(ObservedToJson(*second), text);
  }
  { SavedObserver never_asked(path); }
  std::string missing = std::filesystem::temp_directory_path() / "berth-no-such-observation.json";
  SavedObserver gone(missing);
  Result<Observed> r = gone.Observe(d);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("cannot read saved observation"));
  EXPECT_THAT(r.status().message(), HasSubstr("berth observe -o json > FILE"));
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

// What each standby's server said of its sleep round-trips; an observation without it (no
// standby ran) reads as nothing asked; anything but a boolean is refused, naming the unit.
TEST(ObservedJsonStandby, SleepingRoundTripsAndIsChecked) {
  Observed o;
  o.sleeping["a.service"] = true;
  o.sleeping["b.service"] = false;
  std::string text = ObservedToJson(o);
  EXPECT_NE(text.find("\"sleeping\""), std::string::npos);
  Result<Observed> back = ObservedFromJson(text, "o.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->sleeping, o.sleeping);
  EXPECT_TRUE(back->Asleep("a.service"));
  EXPECT_FALSE(back->Asleep("b.service"));
  EXPECT_FALSE(back->Asleep("c.service"));
  EXPECT_EQ(ObservedToJson(Observed()).find("\"sleeping\""), std::string::npos);
  for (const char* bad : {"\"yes\"", "1", "null", "[true]"}) {
    std::string edited = text;
    edited.replace(edited.find("true", edited.find("\"sleeping\"")), 4, bad);
    Result<Observed> r = ObservedFromJson(edited, "o.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(),
                ::testing::HasSubstr("sleeping.a.service: expected true or false"))
        << bad;
  }
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

std::set<std::string> FirstWords(const std::string& text) {
  std::set<std::string> words;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) words.insert(line.substr(0, line.find(' ')));
  return words;
}

// One model of the observation: whatever `berth observe` shows in text, its JSON carries (the
// text of the observation read back from its JSON is the text itself).
TEST(ObservedJsonText, EverythingTheTextShowsIsInTheJson) {
  Observed o;
  o.hostname = "gpu-01";
  o.observed_at = "2026-12-01T00:00:00Z";
  ObservedRevision rev{"c0ffee0",    {"main"},     true,         30,          30,
                       std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  rev.weights_bytes = 20;
  rev.resident_bytes = 12;
  o.store = {"/m", true, 10, 5, {{"org/a", {rev}}}};
  o.gpus.push_back({0, "GPU-1", "H100", 80, 40, {{7, 30, "x.service", "vllm"}}});
  ObservedUnit u;
  u.name = "x.service";
  u.load_state = "loaded";
  u.active_state = "active";
  u.sub_state = "running";
  u.unit_file_state = "enabled";
  u.managed = true;
  o.units.push_back(u);
  o.sleeping["x.service"] = true;
  o.ports.push_back({8000, "0.0.0.0", 7, "vllm", "x.service"});
  o.warnings = {"an apply is running now"};
  for (bool known : {true, false}) {
    o.memory = {};
    o.memory.known = known;
    o.memory.total_bytes = known ? 2'000'000 : 0;
    o.memory.available_bytes = known ? 1'500'000 : 0;
    if (!known) o.memory.error = "/proc/meminfo: no MemAvailable line";
    o.gpus_known = o.units_known = known;
    o.gpu_error = known ? "" : "NVML not found";
    Result<Observed> back = ObservedFromJson(ObservedToJson(o), "o.json");
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_THAT(ObservedToText(o), HasSubstr("memory: "));
    EXPECT_EQ(ObservedToText(*back), ObservedToText(o));
  }
}

// `berth observe -o json` without -f: every kind of line the text shows of this host (host
// memory among them) comes back from the JSON.
TEST(ObservedJsonText, ObserveWithoutAManifestShowsTheSameInTextAndJson) {
  HostAccess access;
  access.bus_address = "unix:path=/nonexistent/berth-test-bus";
  access.state_dir = (std::filesystem::temp_directory_path() / "berth-observe-text-json").string();
  std::ostringstream text, json, err;
  ASSERT_EQ(RunObserve("", "text", access, text, err), kExitOk) << err.str();
  ASSERT_EQ(RunObserve("", "json", access, json, err), kExitOk) << err.str();
  Result<Observed> back = ObservedFromJson(json.str(), "observe.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(FirstWords(ObservedToText(*back)), FirstWords(text.str()));
  EXPECT_EQ(FirstWords(text.str()).count("memory:"), 1u) << text.str();
}

}  // namespace
}  // namespace berth
