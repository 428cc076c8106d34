#include "planners/glob.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(Glob, StarCrossesSlashesLikeHuggingfaceHub) {
  EXPECT_TRUE(IncludedByFilters("sub/model.safetensors", {"*.safetensors"}, {}));
  EXPECT_FALSE(IncludedByFilters("README.md", {"*.safetensors"}, {}));
}

TEST(Glob, ExcludeWinsOverInclude) {
  EXPECT_FALSE(IncludedByFilters("original/a.safetensors", {"*.safetensors"}, {"original/*"}));
}

TEST(Glob, AFolderPatternMatchesEverythingBelowIt) {
  EXPECT_TRUE(IncludedByFilters("tokenizer/vocab.json", {"tokenizer/"}, {}));
  EXPECT_FALSE(IncludedByFilters("tokenizer.json", {"tokenizer/"}, {}));
}

TEST(Glob, NoIncludeMeansEverything) { EXPECT_TRUE(IncludedByFilters("x/y", {}, {})); }

TEST(Glob, HostnamePatterns) {
  EXPECT_TRUE(GlobMatch("gpu-*", "gpu-01"));
  EXPECT_FALSE(GlobMatch("gpu-?", "gpu-01"));
  EXPECT_TRUE(GlobMatch("gpu-[0-9][0-9]", "gpu-07"));
}

}  // namespace
}  // namespace berth
