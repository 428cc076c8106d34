// The tune file of berth tune (issue 40): a full file decoded field by field, the order and names
// of the candidates axes make, the defaults, and each mistake with the FILE:LINE:COL and message
// an operator sees.
#include "manifests/tune_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<std::string> Problems(const std::string& yaml) {
  std::vector<std::string> out;
  for (const Diagnostic& d : LoadTuneText("tune.yaml", yaml).diagnostics)
    out.push_back(d.ToString());
  return out;
}

TuneSpec Decode(const std::string& yaml) {
  TuneLoadResult result = LoadTuneText("tune.yaml", yaml);
  EXPECT_THAT(Problems(yaml), IsEmpty());
  return result.spec;
}

std::vector<std::string> Names(const TuneSpec& spec) {
  std::vector<std::string> out;
  for (const TuneCandidate& c : spec.candidates) out.push_back(c.name);
  return out;
}

TuneSetting Set(std::string path, std::string value) {
  return TuneSetting{std::move(path), std::move(value)};
}

SourceLoc At(int line, int column) { return SourceLoc{"tune.yaml", line, column}; }

TEST(TuneFile, AFullFileDecodesEveryField) {
  TuneSpec spec = Decode(R"(berth_tune: 1
service: chat
baseline: false
candidates:
  - name: tp4
    set: {gpus: [0, 1, 2, 3], vllm.tensor_parallel_size: 4}
  - name: tp8-ep
    set:
      gpus: [0, 1, 2, 3, 4, 5, 6, 7]
      vllm.tensor_parallel_size: 8
      vllm.enable_expert_parallel: true
axes:
  vllm.max_num_seqs: [128, 256]
load:
  concurrency: 4
  num_prompts: 32
  request_rate: 2.5
  seed: 7
  prompt_tokens: 512
  max_tokens: 64
  warmup: 2
  chat: true
objective:
  maximize: goodput
  ttft_p99: 2s
  tpot_p99: 200ms
  e2e_p99: 30s
)");
  EXPECT_EQ(spec.file, "tune.yaml");
  EXPECT_EQ(spec.service, "chat");
  EXPECT_FALSE(spec.baseline);
  ASSERT_EQ(spec.candidates.size(), 4u);
  const std::vector<TuneSetting> tp4 = {Set("gpus", "[0, 1, 2, 3]"),
                                        Set("vllm.tensor_parallel_size", "4")};
  const std::vector<TuneSetting> tp8 = {Set("gpus", "[0, 1, 2, 3, 4, 5, 6, 7]"),
                                        Set("vllm.tensor_parallel_size", "8"),
                                        Set("vllm.enable_expert_parallel", "true")};
  auto with = [](std::vector<TuneSetting> s, const char* seqs) {
    s.push_back(Set("vllm.max_num_seqs", seqs));
    return s;
  };
  EXPECT_EQ(spec.candidates[0],
            (TuneCandidate{"tp4 max_num_seqs=128", with(tp4, "128"), At(5, 5)}));
  EXPECT_EQ(spec.candidates[1],
            (TuneCandidate{"tp4 max_num_seqs=256", with(tp4, "256"), At(5, 5)}));
  EXPECT_EQ(spec.candidates[2],
            (TuneCandidate{"tp8-ep max_num_seqs=128", with(tp8, "128"), At(7, 5)}));
  EXPECT_EQ(spec.candidates[3],
            (TuneCandidate{"tp8-ep max_num_seqs=256", with(tp8, "256"), At(7, 5)}));
  EXPECT_EQ(spec.load, (TuneLoad{.concurrency = 4,
                                 .num_prompts = 32,
                                 .duration_ms = 0,
                                 .request_rate = 2.5,
                                 .seed = 7,
                                 .prompt_tokens = 512,
                                 .max_tokens = 64,
                                 .warmup_requests = 2,
                                 .chat = true}));
  EXPECT_EQ(spec.objective, (TuneObjective{.maximize = TuneObjective::Metric::kGoodput,
                                           .ttft_p99_ms = 2000,
                                           .tpot_p99_ms = 200,
                                           .e2e_p99_ms = 30000}));
}

TEST(TuneFile, ListedCandidatesKeepTheirNamesAndUnnamedOnesAreSpelledFromTheirSettings) {
  TuneSpec spec = Decode(R"(berth_tune: 1
service: chat
candidates:
  - {name: small, set: {vllm.max_num_seqs: 64}}
  - set: {vllm.max_num_seqs: 512, vllm.max_model_len: 8192}
)");
  EXPECT_THAT(Names(spec), ElementsAre("small", "max_num_seqs=512 max_model_len=8192"));
  EXPECT_EQ(spec.candidates[1].loc, At(5, 5));
}

TEST(TuneFile, AxesAloneMakeEveryCombinationTheFirstAxisChangingSlowest) {
  TuneSpec spec = Decode(R"(berth_tune: 1
service: tiny
axes:
  llama_server.threads: [1, 2]
  llama_server.parallel: [1, 4]
)");
  EXPECT_THAT(Names(spec), ElementsAre("threads=1 parallel=1", "threads=1 parallel=4",
                                       "threads=2 parallel=1", "threads=2 parallel=4"));
  EXPECT_EQ(spec.candidates[1].settings,
            (std::vector<TuneSetting>{Set("llama_server.threads", "1"),
                                      Set("llama_server.parallel", "4")}));
  for (const TuneCandidate& c : spec.candidates) EXPECT_EQ(c.loc, At(3, 1)) << c.name;
}

TEST(TuneFile, EachCandidateIsCombinedWithEveryCombinationOfTheAxesItsSettingsFirst) {
  TuneSpec spec = Decode(R"(berth_tune: 1
service: tiny
candidates:
  - {name: ctx4k, set: {llama_server.ctx_size: 4096}}
  - set: {llama_server.ctx_size: 8192}
axes:
  llama_server.threads: [1, 2]
)");
  EXPECT_THAT(Names(spec), ElementsAre("ctx4k threads=1", "ctx4k threads=2",
                                       "ctx_size=8192 threads=1", "ctx_size=8192 threads=2"));
  EXPECT_EQ(spec.candidates[3].settings,
            (std::vector<TuneSetting>{Set("llama_server.ctx_size", "8192"),
                                      Set("llama_server.threads", "2")}));
  EXPECT_EQ(spec.candidates[0].loc, At(4, 5));
  EXPECT_EQ(spec.candidates[3].loc, At(5, 5));
}

TEST(TuneFile, GeneratedNamesThatWouldBeTheSameUseFullPaths) {
  TuneSpec spec = Decode(R"(berth_tune: 1
service: tiny
candidates:
  - set: {llama_server.threads: 4}
  - set: {env.threads: 4}
  - set: {llama_server.parallel: 2}
  - set: {llama_server.batch: 8, env.batch: 8}
)");
  EXPECT_THAT(Names(spec), ElementsAre("llama_server.threads=4", "env.threads=4", "parallel=2",
                                       "llama_server.batch=8 env.batch=8"));
}

TEST(TuneFile, LeftOutKeysTakeTheirDefaults) {
  TuneSpec spec = Decode(R"(berth_tune: 1
service: tiny
axes: {llama_server.threads: [1, 2]}
)");
  EXPECT_TRUE(spec.baseline);
  EXPECT_EQ(spec.load, (TuneLoad{.concurrency = 1,
                                 .num_prompts = 0,
                                 .duration_ms = 30000,
                                 .request_rate = 0,
                                 .seed = 0,
                                 .prompt_tokens = 128,
                                 .max_tokens = 256,
                                 .warmup_requests = 0,
                                 .chat = false}));
  EXPECT_EQ(spec.objective, TuneObjective{});
  EXPECT_EQ(spec.objective.maximize, TuneObjective::Metric::kOutputTokensPerSecond);
}

TEST(TuneFile, ADurationAndAnInfiniteRateAreTaken) {
  TuneSpec spec = Decode(R"(berth_tune: 1
service: tiny
axes: {llama_server.threads: [1, 2]}
load: {duration: 2m, request_rate: inf}
objective: {maximize: output_tokens_per_second, e2e_p99: 10s}
)");
  EXPECT_EQ(spec.load.duration_ms, 120000u);
  EXPECT_EQ(spec.load.num_prompts, 0u);
  EXPECT_EQ(spec.load.request_rate, 0);
  EXPECT_EQ(spec.objective.e2e_p99_ms, 10000);
}

TEST(TuneFile, ValuesAreKeptAsFlowTextThatReadsBackTheSame) {
  TuneSpec spec = Decode(R"(berth_tune: 1
service: chat
candidates:
  - name: mtp
    set:
      gpus:
        - 0
        - 1
      vllm.speculative:
        method: mtp
        num_speculative_tokens: 1
      vllm.quoted_number: "4"
      vllm.tagged_number: !!str 8
      args: a,b
      env.NOTE: 'say "hi": now'
      vllm.off: false
      vllm.none: null
      vllm.empty: []
)");
  ASSERT_EQ(spec.candidates.size(), 1u);
  EXPECT_EQ(spec.candidates[0].settings,
            (std::vector<TuneSetting>{
                Set("gpus", "[0, 1]"),
                Set("vllm.speculative", "{method: mtp, num_speculative_tokens: 1}"),
                Set("vllm.quoted_number", "\"4\""), Set("vllm.tagged_number", "\"8\""),
                Set("args", "\"a,b\""), Set("env.NOTE", R"("say \"hi\": now")"),
                Set("vllm.off", "false"), Set("vllm.none", "null"), Set("vllm.empty", "[]")}));
}

TEST(TuneFile, AnAliasThatHoldsItselfIsRefusedNotFollowedForever) {
  EXPECT_THAT(Problems(R"(berth_tune: 1
service: chat
candidates:
  - set: {vllm.loop: &a [*a]}
)"),
              ElementsAre("tune.yaml:4:22: the value of 'vllm.loop' nests deeper than 32 or is "
                          "longer than 64 KiB (a setting's value is a manifest value: a number, a "
                          "string, a short list or map)"));
}

// The errors, one class each.

TEST(TuneFile, UnknownKeysAreNamedWithTheClosestKnownOne) {
  EXPECT_THAT(Problems(R"(berth_tune: 1
service: chat
candidate:
  - set: {vllm.max_num_seqs: 64}
axes: {vllm.max_num_seqs: [1, 2]}
load: {concurency: 4}
objective: {maximise: goodput, ttft_p99: 1s}
)"),
              ElementsAre("tune.yaml:3:1: unknown key 'candidate' at the top level (did you mean "
                          "'candidates'?)",
                          "tune.yaml:6:8: unknown key 'concurency' in load (did you mean "
                          "'concurrency'?)",
                          "tune.yaml:7:13: unknown key 'maximise' in objective (did you mean "
                          "'maximize'?)"));
}

TEST(TuneFile, AFileWithoutServiceOrVersionIsRefused) {
  EXPECT_THAT(Problems("axes: {llama_server.threads: [1, 2]}\n"),
              ElementsAre("tune.yaml:1:1: missing 'berth_tune: 1' (every tune file starts with "
                          "berth_tune: 1)",
                          "tune.yaml:1:1: missing 'service' (name the service of the manifest to "
                          "tune, e.g. service: chat)"));
}

TEST(TuneFile, AnotherVersionIsRefused) {
  EXPECT_THAT(Problems(R"(berth_tune: 2
service: chat
axes: {llama_server.threads: [1, 2]}
)"),
              ElementsAre("tune.yaml:1:13: unsupported berth_tune version 2 (this berth reads "
                          "berth_tune: 1)"));
}

TEST(TuneFile, NumPromptsAndDurationTogetherAreRefusedAtTheSecond) {
  EXPECT_THAT(Problems(R"(berth_tune: 1
service: chat
axes: {llama_server.threads: [1, 2]}
load:
  duration: 30s
  num_prompts: 32
)"),
              ElementsAre("tune.yaml:6:3: 'num_prompts' and 'duration' are both given (give one: "
                          "num_prompts sends that many requests, duration measures for that "
                          "long)"));
}

TEST(TuneFile, BadSettingPathsAreRefusedAtTheirKey) {
  EXPECT_THAT(Problems(R"(berth_tune: 1
service: chat
candidates:
  - set: {vllm..tensor_parallel_size: 4}
axes:
  "llama_server.threads count": [1, 2]
  .parallel: [1]
)"),
              ElementsAre("tune.yaml:4:11: bad setting path 'vllm..tensor_parallel_size' "
                          "(dot-separated names of letters, digits, '_' and '-', e.g. "
                          "vllm.tensor_parallel_size)",
                          "tune.yaml:6:3: bad setting path 'llama_server.threads count' "
                          "(dot-separated names of letters, digits, '_' and '-', e.g. "
                          "vllm.tensor_parallel_size)",
                          "tune.yaml:7:3: bad setting path '.parallel' (dot-separated names of "
                          "letters, digits, '_' and '-', e.g. vllm.tensor_parallel_size)"));
}

TEST(TuneFile, CandidateNamesMustBeSimpleUniqueAndNotTheBaselines) {
  EXPECT_THAT(
      Problems(R"(berth_tune: 1
service: chat
candidates:
  - {name: tp4, set: {vllm.tensor_parallel_size: 4}}
  - {name: tp4, set: {vllm.tensor_parallel_size: 8}}
  - {name: "tp 2", set: {vllm.tensor_parallel_size: 2}}
  - {name: declared, set: {vllm.tensor_parallel_size: 1}}
)"),
      ElementsAre(
          "tune.yaml:5:12: candidate name 'tp4' is used twice, first at tune.yaml:4:12",
          "tune.yaml:6:12: bad candidate name 'tp 2' (1-64 letters, digits, '.', '_' or '-')",
          "tune.yaml:7:12: 'declared' is the name of the declared configuration (the baseline is "
          "measured as 'declared'; name this candidate otherwise)"));
}

TEST(TuneFile, TwoCandidatesWithTheSameSettingsAreNamedBoth) {
  EXPECT_THAT(Problems(R"(berth_tune: 1
service: chat
candidates:
  - name: tp4
    set: {gpus: [0, 1, 2, 3], vllm.tensor_parallel_size: 4}
  - set: {vllm.tensor_parallel_size: 4, gpus: [0,1,2,3]}
)"),
              ElementsAre("tune.yaml:6:5: candidates 'tp4' and 'tensor_parallel_size=4 gpus=[0, "
                          "1, 2, 3]' set the same values ('tp4' is at tune.yaml:4:5)"));
}

TEST(TuneFile, AValueListedTwiceInAnAxisIsRefused) {
  EXPECT_THAT(Problems(R"(berth_tune: 1
service: chat
axes:
  llama_server.threads: [1, 2, 1]
)"),
              ElementsAre("tune.yaml:4:32: 1 is listed twice in axis 'llama_server.threads', "
                          "first at tune.yaml:4:26"));
}

TEST(TuneFile, APathSetByACandidateAndAnAxisOrInsideAnotherIsRefused) {
  EXPECT_THAT(Problems(R"(berth_tune: 1
service: chat
candidates:
  - set: {llama_server.threads: 4}
  - set: {llama_server: {threads: 2}, llama_server.parallel: 2}
axes:
  llama_server.threads: [1, 2]
)"),
              ElementsAre("tune.yaml:4:11: 'llama_server.threads' is set by a candidate and by "
                          "the axis 'llama_server.threads' at tune.yaml:7:3 (an axis sets its path "
                          "on every candidate; remove one of the two)",
                          "tune.yaml:5:11: 'llama_server' is set by a candidate and by the axis "
                          "'llama_server.threads' at tune.yaml:7:3 (an axis sets its path on every "
                          "candidate; remove one of the two)",
                          "tune.yaml:5:39: 'llama_server.parallel' and 'llama_server' are one "
                          "inside the other in one candidate, first at tune.yaml:5:11 (set the "
                          "inner value or the whole outer one, not both)"));
}

TEST(TuneFile, GoodputWithoutALimitIsRefused) {
  EXPECT_THAT(Problems(R"(berth_tune: 1
service: chat
axes: {llama_server.threads: [1, 2]}
objective:
  maximize: goodput
)"),
              ElementsAre("tune.yaml:5:13: 'maximize: goodput' needs a limit (goodput counts the "
                          "requests that meet ttft_p99, tpot_p99 and e2e_p99; set at least one)"));
}

TEST(TuneFile, MoreThan256CandidatesAreRefusedWithTheirCount) {
  std::string values = "[";
  for (int i = 1; i <= 17; ++i) values += (i > 1 ? ", " : "") + std::to_string(i);
  values += "]";
  EXPECT_THAT(Problems("berth_tune: 1\nservice: chat\ncandidates:\n"
                       "  - set: {llama_server.ctx_size: 4096}\n"
                       "  - set: {llama_server.ctx_size: 8192}\n"
                       "axes:\n  llama_server.threads: " +
                       values + "\n  llama_server.parallel: " + values + "\n"),
              ElementsAre("tune.yaml:6:1: the tune file makes 578 candidates; at most 256 (2 "
                          "candidates × axes of 17 × 17 values; remove values, or split the sweep "
                          "into several tune files)"));
  // 256 exactly is taken.
  EXPECT_THAT(Problems("berth_tune: 1\nservice: chat\naxes:\n"
                       "  llama_server.threads: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, "
                       "15, 16]\n  llama_server.parallel: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, "
                       "13, 14, 15, 16]\n"),
              IsEmpty());
}

TEST(TuneFile, AFileWithNoCandidatesIsRefused) {
  EXPECT_THAT(Problems("berth_tune: 1\nservice: chat\n"),
              ElementsAre("tune.yaml:1:1: no candidates (give 'candidates' (a list of settings), "
                          "'axes' (values to combine) or both)"));
  EXPECT_THAT(Problems("berth_tune: 1\nservice: chat\ncandidates: []\n"),
              ElementsAre("tune.yaml:3:13: 'candidates' is empty (list at least one, or leave the "
                          "key out and give axes)"));
}

TEST(TuneFile, LoadAndObjectiveValuesOutOfRangeAreEachReported) {
  EXPECT_THAT(
      Problems(R"(berth_tune: 1
service: chat
axes: {llama_server.threads: [1, 2]}
load:
  concurrency: 0
  duration: 0s
  request_rate: -1
  warmup: 10s
  max_tokens: 0
objective:
  maximize: latency
  tpot_p99: fast
)"),
      ElementsAre("tune.yaml:5:16: 'concurrency' must be between 1 and 10000, got 0",
                  "tune.yaml:6:13: 'duration' must be above 0",
                  "tune.yaml:7:17: 'request_rate' must be above 0 and at most 1000000, got -1 "
                  "(requests per second, or inf (the default): each stream sends its next "
                  "request at once)",
                  "tune.yaml:8:11: expected an integer for 'warmup', got a string",
                  "tune.yaml:9:15: 'max_tokens' must be between 1 and 1000000, got 0",
                  "tune.yaml:11:13: bad maximize 'latency' (use output_tokens_per_second or "
                  "goodput)",
                  "tune.yaml:12:13: bad duration 'fast' for 'tpot_p99' (use e.g. 30m, 1h30m, 45s, "
                  "500ms)"));
}

TEST(TuneFile, BrokenYamlIsOneProblemAtTheParsersPosition) {
  std::vector<std::string> problems = Problems("berth_tune: 1\nservice: [chat\n");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], ::testing::StartsWith("tune.yaml:"));
  EXPECT_THAT(problems[0], ::testing::HasSubstr("YAML syntax error"));
}

TEST(TuneFile, FilesAreReadWithinTheManifestBound) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("berth-tune-file-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "tune.yaml").string();
  std::ofstream(good) << "berth_tune: 1\nservice: chat\naxes: {llama_server.threads: [1, 2]}\n";
  TuneLoadResult loaded = LoadTuneFile(good);
  EXPECT_TRUE(loaded.ok());
  EXPECT_EQ(loaded.spec.file, good);
  EXPECT_EQ(loaded.spec.candidates.size(), 2u);

  const std::string big = (dir / "big.yaml").string();
  std::ofstream(big) << std::string(kMaxManifestFileBytes + 1, '#');
  TuneLoadResult too_big = LoadTuneFile(big);
  ASSERT_EQ(too_big.diagnostics.size(), 1u);
  EXPECT_THAT(too_big.diagnostics[0].ToString(),
              ::testing::StartsWith(big + ": larger than berth reads (4194305 bytes"));

  EXPECT_THAT(LoadTuneFile((dir / "absent.yaml").string()).diagnostics[0].ToString(),
              (dir / "absent.yaml").string() + ": no such file (pass the tune file's path)");
  EXPECT_THAT(LoadTuneFile(dir.string()).diagnostics[0].ToString(),
              ::testing::HasSubstr("is not a regular file (it is a folder)"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace berth
