#include "core/unit_marker.h"

#include <gtest/gtest.h>

#include <vector>

namespace berth {
namespace {

const std::string kLineage = "0123456789abcdef0123456789abcdef";
const std::string kUnit =
    "# Managed by berth 0.1.0. Edits are drift: berth rewrites this file.\n"
    "# berth-spec-hash: 42\n"
    "[Unit]\nDescription=x\n";

TEST(UnitMarker, StampingAddsTheLineageToTheHeaderAndLeavesTheBodyAndHash) {
  std::string stamped = StampLineage(kUnit, kLineage);
  EXPECT_EQ(stamped,
            "# Managed by berth 0.1.0. Edits are drift: berth rewrites this file.\n"
            "# berth-spec-hash: 42\n"
            "# berth-lineage: " +
                kLineage + "\n[Unit]\nDescription=x\n");
  EXPECT_EQ(UnitLineage(stamped), kLineage);
  EXPECT_EQ(UnitBody(stamped), UnitBody(kUnit));
  EXPECT_EQ(UnitSpecHash(stamped), "42");
  EXPECT_TRUE(IsBerthUnit(stamped));
}

TEST(UnitMarker, RestampingReplacesTheLineageInsteadOfAddingASecond) {
  std::string once = StampLineage(kUnit, kLineage);
  std::string twice = StampLineage(once, "ffff");
  EXPECT_EQ(UnitLineage(twice), "ffff");
  EXPECT_EQ(twice.find(kLineage), std::string::npos);
  EXPECT_EQ(StampLineage(once, kLineage), once);
}

TEST(UnitMarker, NothingIsStampedIntoAFileBerthDidNotWriteOrWithNoLineage) {
  EXPECT_EQ(StampLineage("[Unit]\n", kLineage), "[Unit]\n");
  EXPECT_EQ(StampLineage(kUnit, ""), kUnit);
  EXPECT_EQ(UnitLineage(kUnit), "");
}

TEST(UnitMarker, ALineageThatIsNotShortLowercaseHexIsNone) {
  // The unit directory is not trusted: what a hand edit puts there is no lineage at all.
  for (const std::string& bad : std::vector<std::string>{
           "../../etc", "ABCDEF", std::string(65, 'a'), "ab cd", std::string("ab\x01", 3)}) {
    std::string unit = "# Managed by berth\n# berth-lineage: " + bad + "\n[Unit]\n";
    EXPECT_EQ(UnitLineage(unit), "") << bad;
  }
  // Outside the header (in the body) a lineage line counts for nothing.
  EXPECT_EQ(UnitLineage(kUnit + "# berth-lineage: " + kLineage + "\n"), "");
  // Without berth's marker on the first line, nothing is berth's.
  EXPECT_EQ(UnitLineage("# berth-lineage: " + kLineage + "\n[Unit]\n"), "");
}

TEST(UnitMarker, WithoutLineageUndoesTheStampAndNothingElse) {
  EXPECT_EQ(WithoutLineage(StampLineage(kUnit, kLineage)), kUnit);
  EXPECT_EQ(WithoutLineage(kUnit), kUnit);
  // A hand-written file is shown as it is, even a line that looks like berth's.
  std::string hand = "# berth-lineage: " + kLineage + "\n[Unit]\n";
  EXPECT_EQ(WithoutLineage(hand), hand);
}

}  // namespace
}  // namespace berth
