// core/read_file.h: whatever stands at a path berth reads (a link where berth writes, a
// FIFO, a device, a file of gigabytes), the read ends at once with an error naming the file and
// what it is; a regular file is read whole. Reads that could block run aside with a deadline, so
// that a regression fails the test instead of hanging it.
#include "core/read_file.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>

#include "core/atomic_file.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class ReadFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("berth-readfile-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  /// ReadRegularFile in a thread: were it to block, the test fails at the deadline.
  static Result<std::string> ReadAside(const std::string& path, FileReadOptions o = {}) {
    auto read = std::async(std::launch::async, [=] { return ReadRegularFile(path, o); });
    if (read.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "reading " << path << " blocked";
      std::abort();  // the thread cannot be cancelled; the test binary must not hang
    }
    return read.get();
  }
  fs::path dir_;
};

TEST_F(ReadFileTest, ARegularFileIsReadWholeAndAMissingOneIsNotFound) {
  std::ofstream(Path("a.json"), std::ios::binary) << std::string(200000, 'x');
  Result<std::string> text = ReadAside(Path("a.json"));
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(text->size(), 200000u);
  Result<std::string> none = ReadAside(Path("none.json"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
}

TEST_F(ReadFileTest, ALinkWhereBerthWritesIsRefusedNamingWhereItPoints) {
  std::ofstream(Path("secret")) << "not berth's";
  fs::create_symlink(Path("secret"), Path("state.json"));
  Result<std::string> text = ReadAside(Path("state.json"));
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(text.status().message(),
              HasSubstr(Path("state.json") + " is a symbolic link to '" + Path("secret") + "'"));
  EXPECT_THAT(text.status().message(), HasSubstr("remove the link"));
  // An operator's file (a password, --observed) may be a link: followed on request.
  Result<std::string> followed = ReadAside(Path("state.json"), {.follow_links = true});
  ASSERT_TRUE(followed.ok()) << followed.status().message();
  EXPECT_EQ(*followed, "not berth's");
}

TEST_F(ReadFileTest, AFifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo(Path("state.json").c_str(), 0600), 0);
  Result<std::string> text = ReadAside(Path("state.json"));
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(),
              HasSubstr(Path("state.json") + " is not a regular file (it is a FIFO)"));
  // Followed through a link too: the link is followed, the FIFO still refused.
  fs::create_symlink(Path("state.json"), Path("link"));
  Result<std::string> linked = ReadAside(Path("link"), {.follow_links = true});
  ASSERT_FALSE(linked.ok());
  EXPECT_THAT(linked.status().message(), HasSubstr("it is a FIFO"));
}

TEST_F(ReadFileTest, DevZeroAndDevUrandomAreDevicesNotEndlessFiles) {
  for (const char* device : {"/dev/zero", "/dev/urandom"}) {
    Result<std::string> text = ReadAside(device, {.follow_links = true});
    ASSERT_FALSE(text.ok()) << device;
    EXPECT_THAT(text.status().message(),
                HasSubstr(std::string(device) + " is not a regular file (it is a character "
                                                "device)"));
  }
}

TEST_F(ReadFileTest, AFileOverItsBoundIsRefusedBeforeItIsRead) {
  // 8 GiB, sparse: were it read, the test would take minutes and gigabytes.
  int fd = ::open(Path("history.json").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{8} << 30), 0);
  ::close(fd);
  Result<std::string> text = ReadAside(Path("history.json"), {.max_bytes = 1 << 20});
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(),
              HasSubstr(Path("history.json") + " is 8.59 GB, more than the 1.05 MB berth reads"));
  EXPECT_THAT(text.status().message(), HasSubstr("move it aside"));
}

TEST_F(ReadFileTest, AFileWithoutASizeIsCutAtItsBound) {
  // /proc's files report size 0 and hold more: the read stops at the bound.
  Result<std::string> text = ReadAside("/proc/self/maps", {.max_bytes = 16});
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("/proc/self/maps holds more than the 16 B"));
  EXPECT_TRUE(ReadAside("/proc/self/maps").ok());
}

TEST_F(ReadFileTest, ALockFileIsNeverOpenedThroughALinkNorAsAFifo) {
  std::ofstream(Path("victim")) << "precious";
  fs::create_symlink(Path("victim"), Path("lock"));
  Result<int> fd = OpenLockFile(Path("lock"));
  ASSERT_FALSE(fd.ok());
  EXPECT_THAT(fd.status().message(), HasSubstr(Path("lock") + " is a symbolic link"));
  ASSERT_EQ(::mkfifo(Path("fifo-lock").c_str(), 0600), 0);
  Result<int> fifo = OpenLockFile(Path("fifo-lock"));
  ASSERT_FALSE(fifo.ok());
  EXPECT_THAT(fifo.status().message(), HasSubstr("it is a FIFO"));
  Result<int> fresh = OpenLockFile(Path("new-lock"));
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  ::close(*fresh);
  std::ifstream victim(Path("victim"));
  std::string text((std::istreambuf_iterator<char>(victim)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "precious");
}

TEST_F(ReadFileTest, AnAtomicWriteNeverWritesThroughALinkAtItsTempName) {
  // A link planted where the temp file of a write will be (its name is predictable: the pid).
  std::ofstream(Path("victim")) << "precious";
  fs::create_symlink(Path("victim"), Path(".state.json.tmp." + std::to_string(::getpid())));
  fs::create_symlink(Path("victim"), Path("state.json"));
  ASSERT_TRUE(WriteFileAtomically(Path("state.json"), "{}\n").ok());
  std::ifstream victim(Path("victim"));
  std::string text((std::istreambuf_iterator<char>(victim)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "precious");
  EXPECT_EQ(fs::symlink_status(Path("state.json")).type(), fs::file_type::regular)
      << "the link at the name is replaced, not written through";
  EXPECT_EQ(*ReadRegularFile(Path("state.json")), "{}\n");
}

// A berth killed between an atomic write's create and its rename leaves ".NAME.tmp.PID" behind
// (two were found after kills during front switches). The next pass, holding the lock, removes
// those of processes that no longer run and keeps a live one's, and anything that is not a file.
TEST_F(ReadFileTest, TempFilesOfKilledWritersAreRemovedAndALiveOnesKept) {
  const std::string dead = ".journal.json.tmp.4194305";  // above the kernel's highest pid
  const std::string live = ".state.json.tmp." + std::to_string(::getpid());
  for (const std::string& name :
       {dead, live, std::string(".history.json.tmp.x"), std::string("journal.json.tmp.4194306")})
    std::ofstream(Path(name)) << "partial";
  fs::create_directory(Path(".dir.tmp.4194307"));
  fs::create_symlink(Path("journal.json"), Path(".link.tmp.4194308"));
  EXPECT_EQ(RemoveOrphanedTempFiles(dir_.string()), std::vector<std::string>{dead});
  EXPECT_FALSE(fs::exists(Path(dead)));
  EXPECT_TRUE(fs::exists(Path(live))) << "a running writer's temp file";
  EXPECT_TRUE(fs::exists(Path(".history.json.tmp.x"))) << "not a pid";
  EXPECT_TRUE(fs::exists(Path("journal.json.tmp.4194306"))) << "not a dot name: not berth's";
  EXPECT_TRUE(fs::is_directory(Path(".dir.tmp.4194307")));
  EXPECT_TRUE(fs::is_symlink(Path(".link.tmp.4194308")));
}

}  // namespace
}  // namespace berth
