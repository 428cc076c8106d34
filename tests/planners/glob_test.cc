#include "planners/glob.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

// The include/exclude filter of a model's files is tested with core/hf_cache.h.
TEST(Glob, HostnamePatterns) {
  EXPECT_TRUE(GlobMatch("gpu-*", "gpu-01"));
  EXPECT_FALSE(GlobMatch("gpu-?", "gpu-01"));
  EXPECT_TRUE(GlobMatch("gpu-[0-9][0-9]", "gpu-07"));
}

}  // namespace
}  // namespace berth
