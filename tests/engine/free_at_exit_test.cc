// core/free_at_exit.h: a one-shot command leaves what it built to the exit; everything else
// (the loop, tests) frees it at once.
#include "core/free_at_exit.h"

#include <gtest/gtest.h>

#include <memory>

namespace berth {
namespace {

struct Counted {
  explicit Counted(int* destroyed) : destroyed_(destroyed) {}
  ~Counted() { ++*destroyed_; }
  int* destroyed_;
};

TEST(FreeAtExit, FreedAtOnceUnlessTheProcessSaidItExitsNext) {
  ASSERT_TRUE(FreesAtExit()) << "the default must free: the loop runs pass after pass";
  int destroyed = 0;
  DiscardAtEnd(std::make_unique<Counted>(&destroyed));
  EXPECT_EQ(destroyed, 1);
  SetFreeAtExit(false);
  DiscardAtEnd(std::make_unique<Counted>(&destroyed));  // left to the exit, deliberately
  EXPECT_EQ(destroyed, 1);
  SetFreeAtExit(true);
  DiscardAtEnd(std::make_unique<Counted>(&destroyed));
  EXPECT_EQ(destroyed, 2);
}

}  // namespace
}  // namespace berth
