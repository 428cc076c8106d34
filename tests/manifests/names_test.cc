// The pure naming rules and the did-you-mean matcher.
#include <gtest/gtest.h>

#include <string>

#include "manifests/did_you_mean.h"
#include "manifests/names.h"

namespace berth::manifests {
namespace {

TEST(DidYouMean, TranspositionCostsOne) {
  EXPECT_EQ(EditDistance("prot", "port"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("gpu_memory_utilisation", "gpu_memory_utilization"), 1u);
}

TEST(DidYouMean, SuggestsCloseKeysOnly) {
  const std::vector<std::string_view> keys = {"port", "gpus", "model", "tensor_parallel_size"};
  EXPECT_EQ(DidYouMean("prot", keys), "did you mean 'port'?");
  EXPECT_EQ(DidYouMean("PORT", keys), "did you mean 'port'?");
  EXPECT_EQ(DidYouMean("tensor_parallel", keys), "did you mean 'tensor_parallel_size'?");
  EXPECT_EQ(DidYouMean("x", keys), "");
  EXPECT_EQ(DidYouMean("completely_different", keys), "");
}

TEST(Names, ModelNames) {
  EXPECT_EQ(ModelNameProblem("minimax-m25"), "");
  EXPECT_EQ(ModelNameProblem("Qwen3.5_a"), "");
  EXPECT_EQ(ModelNameProblem("-x"), "it must start with a letter or digit");
  EXPECT_EQ(ModelNameProblem("a/b"), "'/' is not allowed");
  EXPECT_EQ(ModelNameProblem(std::string(65, 'a')), "it is 65 characters (at most 64)");
}

TEST(Names, UnitNames) {
  EXPECT_EQ(UnitNameProblem("vllm-minimax-m25"), "");
  EXPECT_EQ(UnitNameProblem("a:b_c.d-e"), "");
  EXPECT_EQ(UnitNameProblem("foo bar"), "' ' is not allowed");
  EXPECT_EQ(UnitNameProblem("vllm@1"), "'@' is not allowed (template units are not supported)");
  EXPECT_EQ(UnitNameProblem("a/b"), "'/' is not allowed");
  EXPECT_EQ(UnitNameProblem(".hidden"), "it must not start with '.'");
  EXPECT_EQ(UnitNameProblem(std::string(247, 'a')), "");  // 247 + ".service" = 255
  EXPECT_EQ(UnitNameProblem(std::string(248, 'a')),
            "'<name>.service' would be 256 characters (at most 255)");
}

TEST(Names, HfSources) {
  EXPECT_EQ(ParseHfSource("hf://MiniMaxAI/MiniMax-M2.5"), "MiniMaxAI/MiniMax-M2.5");
  EXPECT_EQ(ParseHfSource("hf://MiniMaxAI"), std::nullopt);
  EXPECT_EQ(ParseHfSource("https://huggingface.co/a/b"), std::nullopt);
  EXPECT_EQ(ParseHfSource("hf://a/b/c"), std::nullopt);
  EXPECT_EQ(ParseHfSource("hf://a--b/c"), std::nullopt);
  EXPECT_EQ(ParseHfSource("hf://a/b..c"), std::nullopt);
  EXPECT_EQ(ParseHfSource("hf://-a/b"), std::nullopt);
  EXPECT_EQ(ParseHfSource("hf://a/" + std::string(97, 'b')), std::nullopt);
}

TEST(Names, RevisionsEnvKeysAndSnapshotPaths) {
  EXPECT_TRUE(IsRevision("main"));
  EXPECT_TRUE(IsRevision("refs/pr/1"));
  EXPECT_TRUE(IsRevision("0123456789abcdef0123456789abcdef01234567"));
  EXPECT_FALSE(IsRevision(""));
  EXPECT_FALSE(IsRevision("a b"));
  EXPECT_FALSE(IsRevision("v1..2"));
  EXPECT_TRUE(IsEnvKey("VLLM_USE_V1"));
  EXPECT_TRUE(IsEnvKey("_X"));
  EXPECT_FALSE(IsEnvKey("1X"));
  EXPECT_FALSE(IsEnvKey("A-B"));
  EXPECT_TRUE(IsSnapshotRelativePath("Q4_K_M/model.gguf"));
  EXPECT_FALSE(IsSnapshotRelativePath("/abs/model.gguf"));
  EXPECT_FALSE(IsSnapshotRelativePath("../model.gguf"));
  EXPECT_FALSE(IsSnapshotRelativePath("a/../../b"));
  EXPECT_TRUE(IsSnapshotRelativePath("a..b.gguf"));
}

}  // namespace
}  // namespace berth::manifests
