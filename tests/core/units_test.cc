#include "core/units.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(ParseSize, DecimalAndBinaryUnits) {
  EXPECT_EQ(ParseSize("230GB"), 230'000'000'000u);
  EXPECT_EQ(ParseSize("96GiB"), 96ull << 30);
  EXPECT_EQ(ParseSize("1.7TB"), 1'700'000'000'000u);
  EXPECT_EQ(ParseSize("512 MiB"), 512ull << 20);
  EXPECT_EQ(ParseSize("4096"), 4096u);
  EXPECT_EQ(ParseSize("10B"), 10u);
}

TEST(ParseSize, RejectsWhatIsNotASize) {
  EXPECT_FALSE(ParseSize(""));
  EXPECT_FALSE(ParseSize("GB"));
  EXPECT_FALSE(ParseSize("12XB"));
  EXPECT_FALSE(ParseSize("-5GB"));
  EXPECT_FALSE(ParseSize("1.5"));
  EXPECT_FALSE(ParseSize("99999999999PB"));
}

TEST(ParseDuration, UnitsAndCombinations) {
  EXPECT_EQ(ParseDurationMs("30m"), 1'800'000u);
  EXPECT_EQ(ParseDurationMs("1h30m"), 5'400'000u);
  EXPECT_EQ(ParseDurationMs("45s"), 45'000u);
  EXPECT_EQ(ParseDurationMs("500ms"), 500u);
  EXPECT_EQ(ParseDurationMs("2d"), 172'800'000u);
  EXPECT_FALSE(ParseDurationMs("30"));
  EXPECT_FALSE(ParseDurationMs("5 parsecs"));
  EXPECT_FALSE(ParseDurationMs(""));
}

TEST(FormatBytes, ThreeSignificantDigitsWithoutTrailingZeros) {
  EXPECT_EQ(FormatBytes(230'000'000'000), "230 GB");
  EXPECT_EQ(FormatBytes(1'200'000'000'000), "1.2 TB");
  EXPECT_EQ(FormatBytes(1'250'000'000'000), "1.25 TB");
  EXPECT_EQ(FormatBytes(999), "999 B");
  EXPECT_EQ(FormatBytes(45'500'000), "45.5 MB");
  EXPECT_EQ(FormatSize(100ull << 30), "100 GiB");
  EXPECT_EQ(FormatGiB(79134171955), "73.7 GiB");
  EXPECT_EQ(FormatDurationMs(5'400'000), "1h30m");
}

}  // namespace
}  // namespace berth
