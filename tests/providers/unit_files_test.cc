// The unit directory as berth reads it: a unit file is a regular file; whatever else stands there
// (a FIFO, a device, a huge file) is an error or not berth's, never a read that blocks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <future>

#include "core/unit_marker.h"
#include "providers/systemd/unit_files.h"
#include "tests/providers/temp_dir.h"

namespace berth::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(UnitFiles, AFifoWhereAUnitShouldBeIsAnErrorNotAHang) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "vllm-x.service").c_str(), 0644), 0);
  dir.Write("ok.service", std::string(kUnitMarker) + " spec=abc\n[Service]\nExecStart=/bin/true\n");
  UnitFileStore files(dir.path());
  // Run it aside: were the read to block, the test fails at the deadline instead of hanging.
  auto read = std::async(std::launch::async, [&] { return files.Read("vllm-x.service"); });
  ASSERT_EQ(read.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  Result<std::optional<std::string>> r = read.get();
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("vllm-x.service is not a regular file"));
  auto listed = std::async(std::launch::async, [&] { return files.ListBerthUnits(); });
  ASSERT_EQ(listed.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto names = listed.get();
  ASSERT_TRUE(names.ok()) << names.status().message();
  EXPECT_THAT(*names, ElementsAre("ok.service"));
}

TEST(UnitFiles, AMissingFileIsNoFileAndAWrittenOneReadsBack) {
  TempDir dir;
  UnitFileStore files(dir.path());
  auto none = files.Read("absent.service");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(files.Write("a.service", "[Service]\nExecStart=/bin/true\n").ok());
  auto back = files.Read("a.service");
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ(**back, "[Service]\nExecStart=/bin/true\n");
}

// systemd runs what a unit file says as root: a unit folder another user owns, or one its group
// or others may write, is refused before anything is written (issue 37, 5: the same rule as the
// fronts' folder).
TEST(UnitFiles, AUnitFolderAnotherUserCouldWriteIsRefused) {
  TempDir dir;
  UnitFileStore files(dir.path());
  ASSERT_EQ(::chmod(dir.path().c_str(), 0777), 0);
  Result<bool> open = files.Write("vllm-x.service", "[Service]\nExecStart=/bin/true\n");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().code(), Status::Code::kPermissionDenied);
  EXPECT_THAT(open.status().message(), HasSubstr("the unit folder (host.unit_dir)"));
  EXPECT_THAT(open.status().message(), HasSubstr("is writable by its other users (mode 0777)"));
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::chown(dir.path().c_str(), 65534, 65534), 0) << "the tests run as root";
  EXPECT_THAT(files.Write("vllm-x.service", "[Service]\n").status().message(),
              HasSubstr("is owned by uid 65534, not root"));
  auto none = files.Read("vllm-x.service");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value()) << "nothing was written";
  ASSERT_EQ(::chown(dir.path().c_str(), 0, 0), 0);
  EXPECT_TRUE(files.Write("vllm-x.service", "[Service]\n").ok());
}

}  // namespace
}  // namespace berth::testing
