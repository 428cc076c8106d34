// core/on_demand.h: a member made on first write reads as a default value before, and copies as
// a value (a copied service's options are its own).
#include "core/on_demand.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/desired.h"

namespace berth {
namespace {

struct Options {
  int size = 1;
  std::vector<std::string> names;
};

TEST(OnDemand, ReadUnsetItIsTheDefaultAndNothingIsMade) {
  const OnDemand<Options> unset;
  EXPECT_EQ(unset->size, 1);
  EXPECT_TRUE((*unset).names.empty());
  EXPECT_FALSE(unset.made());
}

TEST(OnDemand, WrittenItIsMadeAndCopiesAreDeep) {
  OnDemand<Options> a;
  a->size = 4;
  a->names.push_back("x");
  EXPECT_TRUE(a.made());
  OnDemand<Options> b = a;
  b->names.push_back("y");
  EXPECT_EQ(a->names.size(), 1u);
  EXPECT_EQ(b->names.size(), 2u);
  EXPECT_EQ(b->size, 4);
  OnDemand<Options> unset;
  b = unset;
  EXPECT_FALSE(b.made());
  EXPECT_EQ(b->size, 1) << "assigning an unset one makes it unset again";
  OnDemand<Options> c = std::move(a);
  EXPECT_EQ(c->size, 4);
}

// The point of it: a service carries one pointer per engine, not every engine's options.
TEST(OnDemand, AServiceOfOneEngineCarriesOnlyItsOwnOptions) {
  ServiceSpec s;
  s.vllm->tensor_parallel_size = 8;
  EXPECT_TRUE(s.vllm.made());
  EXPECT_FALSE(s.sglang.made());
  EXPECT_FALSE(s.llama.made());
  EXPECT_FALSE(s.trtllm.made());
  EXPECT_EQ(s.sglang->mem_fraction_static, SglangOptions{}.mem_fraction_static);
  EXPECT_LE(sizeof(ServiceSpec), sizeof(VllmOptions) + sizeof(SglangOptions) + 1024)
      << "engine options are held apart";
}

}  // namespace
}  // namespace berth
