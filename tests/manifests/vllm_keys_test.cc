// vLLM's first-class keys: what they load into, and what is refused at load, where it is
// written, before any server could refuse it at start.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "manifests/loader.h"
#include "planners/servers/adapter.h"
#include "planners/servers/catalogue.h"
#include "tests/manifests/test_util.h"

namespace berth {
namespace {

using ::berth::testing::Load;
using ::berth::testing::Problems;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAreArray;

// One vLLM service on four GPUs, its vllm: block (and anything after it) appended.
std::string Service(const std::string& rest) {
  return R"(berth: 1
models:
  llama:
    source: hf://meta-llama/Llama-3.1-8B-Instruct
  llama-eagle3:
    source: hf://yuhuili/EAGLE3-LLaMA3.1-Instruct-8B
services:
  v:
    model: llama
    engine: vllm
    gpus: [0, 1, 2, 3]
    port: 8000
)" + rest;
}

TEST(VllmKeys, EveryKeyLoadsIntoTheServicesOptions) {
  LoadResult r = Load(Service(R"(    vllm:
      tensor_parallel_size: 2
      data_parallel_size: 2
      max_num_seqs: 128
      trust_remote_code: true
      tool_call_parser: hermes
      reasoning_parser: deepseek_r1
      kv_cache_dtype: fp8
      speculative:
        method: eagle3
        num_speculative_tokens: 3
        model: llama-eagle3
        draft_tensor_parallel_size: 1
)"));
  ASSERT_THAT(testing::ToStrings(r), IsEmpty());
  const VllmOptions& o = r.desired.services.at("v").vllm;
  EXPECT_EQ(o.tensor_parallel_size, 2);
  EXPECT_EQ(o.data_parallel_size, 2);
  EXPECT_EQ(o.max_num_seqs, 128);
  EXPECT_TRUE(o.trust_remote_code);
  EXPECT_EQ(o.tool_call_parser, "hermes");
  EXPECT_EQ(o.reasoning_parser, "deepseek_r1");
  EXPECT_EQ(o.kv_cache_dtype, "fp8");
  ASSERT_TRUE(o.speculative);
  EXPECT_EQ(o.speculative->method, "eagle3");
  EXPECT_EQ(o.speculative->num_speculative_tokens, 3);
  EXPECT_EQ(o.speculative->model, "llama-eagle3");
  EXPECT_EQ(o.speculative->draft_tensor_parallel_size, 1);
  // The draft model is one the service needs on disk.
  EXPECT_THAT(r.desired.services.at("v").ModelKeys(), ElementsAre("llama", "llama-eagle3"));
}

// Left out, each key keeps vLLM's own default: the command line names none of their flags.
TEST(VllmKeys, LeftOutTheyRenderNothing) {
  LoadResult r = Load(Service("    vllm: {tensor_parallel_size: 4}\n"));
  ASSERT_THAT(testing::ToStrings(r), IsEmpty());
  const ServiceSpec& s = r.desired.services.at("v");
  RenderContext ctx;
  ctx.snapshot_path = "/models/snapshot";
  ctx.executable = "vllm";
  const std::vector<std::string> argv = ServiceArgv(s, ctx);
  EXPECT_THAT(argv, Contains("--tensor-parallel-size")) << "the key given renders";
  for (const char* flag : {"--data-parallel-size", "--max-num-seqs", "--trust-remote-code",
                           "--enable-auto-tool-choice", "--tool-call-parser", "--reasoning-parser",
                           "--kv-cache-dtype", "--speculative-config"})
    EXPECT_THAT(argv, Not(Contains(flag))) << ::testing::PrintToString(argv);
  const VllmOptions& o = s.vllm;
  EXPECT_EQ(o.data_parallel_size, 1);
  EXPECT_FALSE(o.max_num_seqs);
  EXPECT_FALSE(o.trust_remote_code);
  EXPECT_EQ(o.tool_call_parser, "");
  EXPECT_EQ(o.reasoning_parser, "");
  EXPECT_EQ(o.kv_cache_dtype, "");
  EXPECT_FALSE(o.speculative);
  EXPECT_THAT(r.desired.services.at("v").ModelKeys(), ElementsAre("llama"));
}

TEST(VllmKeys, NamesOutsideVllmsTablesAreRefusedWithADidYouMean) {
  EXPECT_THAT(Problems(Service(R"(    vllm:
      tensor_parallel_size: 4
      tool_call_parser: minimax-m2
      reasoning_parser: minimax_m2_append_thinking
      kv_cache_dtype: fp8_e4m2
)")),
              ElementsAre("berth.yaml:15:25: vllm has no tool-call parser 'minimax-m2' (the "
                          "catalogue of the release berth was checked against) (did you mean "
                          "'minimax_m2'?)",
                          "berth.yaml:16:25: vllm has no reasoning parser "
                          "'minimax_m2_append_thinking' (the catalogue of the release berth was "
                          "checked against) (did you mean 'minimax_m2_append_think'?)",
                          "berth.yaml:17:23: vllm has no KV-cache dtype 'fp8_e4m2' (the catalogue "
                          "of the release berth was checked against) (did you mean 'fp8_e4m3'?)"));
}

TEST(VllmKeys, SpeculativeMethodsTakeADraftModelAsVllmSays) {
  EXPECT_THAT(Problems(Service(R"(    vllm:
      tensor_parallel_size: 4
      speculative: {method: eagle3, num_speculative_tokens: 3}
)")),
              ElementsAre("berth.yaml:15:29: vllm.speculative.method eagle3 needs a draft model: "
                          "vLLM refuses it without one (\"num_speculative_tokens was provided but "
                          "without speculative model\") (add model: naming a key of models (the "
                          "draft checkpoint))"));
  EXPECT_THAT(Problems(Service(R"(    vllm:
      tensor_parallel_size: 4
      speculative: {method: mtp, num_speculative_tokens: 1, model: llama-eagle3}
)")),
              ElementsAre("berth.yaml:15:61: vllm.speculative.method mtp takes no draft model: it "
                          "drafts with the target model's own MTP layers (remove model:, or "
                          "choose a method that takes one (eagle3, draft_model))"));
  EXPECT_THAT(Problems(Service(R"(    vllm:
      tensor_parallel_size: 4
      speculative: {method: ngram, num_speculative_tokens: 4, prompt_lookup_max: 4}
)")),
              IsEmpty());
}

TEST(VllmKeys, SpeculativeNeedsItsMethodAndTokensAndAModelThatIsDefined) {
  EXPECT_THAT(Problems(Service(R"(    vllm:
      tensor_parallel_size: 4
      speculative: {model: llama-eagle}
)")),
              ElementsAre("berth.yaml:15:7: vllm.speculative needs 'method' (e.g. method: eagle3)",
                          "berth.yaml:15:7: vllm.speculative needs 'num_speculative_tokens' (the "
                          "number of tokens the draft proposes per step, e.g. "
                          "num_speculative_tokens: 3)",
                          "berth.yaml:15:28: draft model 'llama-eagle' is not defined "
                          "in models (did you mean 'llama-eagle3'?)"));
  EXPECT_THAT(Problems(Service(R"(    vllm:
      tensor_parallel_size: 4
      speculative: {method: mpt, num_speculative_tokens: 1}
)")),
              ElementsAre("berth.yaml:15:29: vllm has no speculative method 'mpt' (the catalogue "
                          "of the release berth was checked against) (did you mean 'mtp'?)"));
}

TEST(VllmKeys, DataParallelCountsInTheGpuRule) {
  // 2 × 1 × 2 = 4 GPUs: fine; 4 × 1 × 2 = 8 is not the 4 listed.
  EXPECT_THAT(Problems(Service("    vllm: {tensor_parallel_size: 2, data_parallel_size: 2}\n")),
              IsEmpty());
  EXPECT_THAT(Problems(Service("    vllm: {tensor_parallel_size: 4, data_parallel_size: 2}\n")),
              ElementsAre("berth.yaml:13:11: tensor_parallel_size 4 × pipeline_parallel_size 1 × "
                          "data_parallel_size 2 = 8, but gpus lists 4 devices (make "
                          "tensor_parallel_size × pipeline_parallel_size × data_parallel_size "
                          "equal the number of GPUs)"));
}

TEST(VllmKeys, ArgsCannotSetWhatTheKeysSetInAnySpelling) {
  EXPECT_THAT(
      Problems(Service(R"(    vllm: {tensor_parallel_size: 4}
    args: [--enforce-eager, -dp, "2"]
  w:
    model: llama
    engine: vllm
    gpus: [4]
    port: 8001
    args: [--tool_call_parser, hermes]
  x:
    model: llama
    engine: vllm
    gpus: [5]
    port: 8002
    args: ['--speculative-config={"method": "ngram"}']
  y:
    model: llama
    engine: vllm
    gpus: [6]
    port: 8003
    vllm: {max_num_seqs: 64}
    args: [--max-num-seqs, "8"]
)")),
      ElementsAre("berth.yaml:14:29: -dp is set by `vllm.data_parallel_size:`; args cannot set "
                  "it (remove it from args, and change `vllm.data_parallel_size:` instead)",
                  "berth.yaml:20:12: --tool_call_parser is set by `vllm.tool_call_parser:`; args "
                  "cannot set it (remove it from args, and change `vllm.tool_call_parser:` "
                  "instead)",
                  "berth.yaml:26:12: --speculative-config is set by `vllm.speculative:`; args "
                  "cannot set it (remove it from args, and change `vllm.speculative:` instead)",
                  "berth.yaml:33:12: --max-num-seqs is set by `vllm.max_num_seqs:`; args "
                  "cannot set it (remove it from args, and change `vllm.max_num_seqs:` instead)"));
}

TEST(VllmKeys, EnvCannotSetTheVariablesVllmNoLongerReads) {
  EXPECT_THAT(Problems(Service(R"(    vllm: {tensor_parallel_size: 4}
    env: {VLLM_USE_V1: "1", VLLM_LOGGING_LEVEL: INFO}
)")),
              ElementsAre("berth.yaml:14:11: 'VLLM_USE_V1' selected vLLM's V0 or V1 engine; V1 is "
                          "the only engine since vLLM 0.11, which no longer reads it (and warns "
                          "of an unknown variable) (remove it from env)"));
}

// manifests/schema.json lists vLLM's names for editors; they are the catalogue's (the validator
// reads the catalogue itself), so the two cannot drift apart.
TEST(VllmKeys, TheSchemasNamesAreTheCataloguesTables) {
  std::ifstream in(std::string(BERTH_SOURCE_DIR) + "/manifests/schema.json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json schema = nlohmann::json::parse(text.str());
  const nlohmann::json& vllm =
      schema["properties"]["services"]["additionalProperties"]["properties"]["vllm"]["properties"];
  const EngineCatalogue& c = Catalogue(CatalogueEngine::kVllm);
  EXPECT_THAT(vllm["kv_cache_dtype"]["enum"].get<std::vector<std::string>>(),
              UnorderedElementsAreArray(c.Table("kv_cache_dtypes")));
  // The deprecated *_mtp spellings of mtp are refused by both.
  std::vector<std::string> methods;
  for (const std::string& m : c.Table("speculative_methods"))
    if (m == "mtp" || !m.ends_with("_mtp")) methods.push_back(m);
  EXPECT_THAT(vllm["speculative"]["properties"]["method"]["enum"].get<std::vector<std::string>>(),
              UnorderedElementsAreArray(methods));
}

TEST(VllmKeys, TheDeprecatedNamesOfMtpAreWrittenMtp) {
  EXPECT_THAT(Problems(Service(R"(    vllm:
      tensor_parallel_size: 4
      speculative: {method: deepseek_mtp, num_speculative_tokens: 1}
)")),
              ElementsAre("berth.yaml:15:29: vllm.speculative.method deepseek_mtp is vLLM's "
                          "deprecated name of method mtp (write method: mtp)"));
}

}  // namespace
}  // namespace berth
