// Host memory and the page cache (providers/host/page_cache.h): meminfo's text as the kernel
// writes it and as it should never be, the residency of files read into the page cache, a
// prewarm's progress and stop, and an eviction where the filesystem honours it.
#include "providers/host/page_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace berth {
namespace {

using ::testing::HasSubstr;

const char* kMeminfo =
    "MemTotal:       24683624 kB\n"
    "MemFree:        22733316 kB\n"
    "MemAvailable:   23541132 kB\n"
    "Buffers:           12180 kB\n"
    "HugePages_Total:       0\n";

TEST(MemInfoTest, TotalAndAvailableAreReadInBytes) {
  auto m = ParseMemInfo(kMeminfo, "/proc/meminfo");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->total_bytes, uint64_t{24683624} * 1024);
  EXPECT_EQ(m->available_bytes, uint64_t{23541132} * 1024);
}

TEST(MemInfoTest, WhatIsNotTheKernelsMeminfoIsAnErrorNamingTheLine) {
  struct Case {
    std::string text;
    const char* says;
  };
  std::vector<Case> cases = {
      {"MemTotal: 10 kB\n", "no MemAvailable line"},
      {"MemAvailable: 10 kB\n", "no MemTotal line"},
      {"MemTotal: 10 kB\nMemAvailable: x kB\n", "/proc/meminfo:2: 'MemAvailable: x kB' is not"},
      {"MemTotal: 10 MB\nMemAvailable: 1 kB\n", "/proc/meminfo:1:"},
      {"MemTotal: 99999999999999999999 kB\nMemAvailable: 1 kB\n", "is not a number of kB"},
      {"MemTotal: 18014398509481984 kB\nMemAvailable: 1 kB\n", "is not a number of kB"},
      {"MemTotal: 10 kB\nMemAvailable: 11 kB\n", "MemAvailable is larger than MemTotal"},
      {"MemTotal: -5 kB\nMemAvailable: 1 kB\n", "is not a number of kB"},
      {std::string(70000, 'x'), "over 64 KiB"},
      {"MemTotal: 10 kB\nMemAvailable: 1\x1b[2J kB\n", "\\x1b"},
  };
  for (const Case& c : cases) {
    auto m = ParseMemInfo(c.text, "/proc/meminfo");
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_EQ(m.status().code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(m.status().message(), HasSubstr(c.says));
  }
}

TEST(MemInfoTest, ThisHostsMeminfoReads) {
  auto m = ReadMemInfo();
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_GT(m->total_bytes, 0u);
  EXPECT_LE(m->available_bytes, m->total_bytes);
}

class PageCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // On the disk (not /tmp, often a tmpfs that keeps every page).
    char dir[] = "/var/tmp/berth-page-cache-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, size_t bytes) {
    std::string path = dir_ + "/" + name;
    std::ofstream out(path, std::ios::binary);
    std::string block(1 << 16, 'w');
    for (size_t left = bytes; left > 0;) {
      size_t n = std::min(left, block.size());
      out.write(block.data(), static_cast<std::streamsize>(n));
      left -= n;
    }
    out.close();
    FILE* f = fopen(path.c_str(), "r");
    if (f) {
      fsync(fileno(f));  // dirty pages cannot be dropped
      fclose(f);
    }
    return path;
  }
  std::string dir_;
};

// After a prewarm every byte of the files is in the page cache, and the progress reached the
// total in steps of at most a chunk; an eviction drops them where the filesystem honours it.
TEST_F(PageCacheTest, APrewarmLeavesTheFilesInThePageCacheAndAnEvictionTakesThemOut) {
  std::vector<std::string> files = {Write("a.safetensors", 3 << 20),
                                    Write("b.safetensors", (1 << 20) + 123), Write("empty", 0)};
  const uint64_t total = (3 << 20) + (1 << 20) + 123;
  std::vector<uint64_t> seen;
  PrewarmOptions o;
  o.chunk_bytes = 1 << 20;
  o.progress = [&](uint64_t done, uint64_t of) {
    EXPECT_EQ(of, total);
    seen.push_back(done);
  };
  auto read = Prewarm(files, o);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, total);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), total);
  for (size_t i = 1; i < seen.size(); ++i) {
    EXPECT_GT(seen[i], seen[i - 1]);
    EXPECT_LE(seen[i] - seen[i - 1], o.chunk_bytes);
  }
  auto warm = PageCacheResidency(files);
  ASSERT_TRUE(warm.ok()) << warm.status().message();
  EXPECT_EQ(warm->files, 3u);
  EXPECT_EQ(warm->bytes, total);
  EXPECT_EQ(warm->resident_bytes, total);

  ASSERT_TRUE(Evict(files).ok());
  auto cold = PageCacheResidency(files);
  ASSERT_TRUE(cold.ok()) << cold.status().message();
  struct statfs fs {};
  ASSERT_EQ(statfs(dir_.c_str(), &fs), 0);
  const bool honours = fs.f_type == EXT4_SUPER_MAGIC || fs.f_type == XFS_SUPER_MAGIC ||
                       fs.f_type == BTRFS_SUPER_MAGIC;
  if (honours) {
    EXPECT_LT(cold->resident_bytes, total / 2) << "ext4, xfs and btrfs drop clean pages";
  } else {
    std::printf(
        "eviction not checked: %s is on a filesystem of type 0x%lx (tmpfs or overlay "
        "may keep the pages); resident after it: %llu of %llu bytes\n",
        dir_.c_str(), static_cast<unsigned long>(fs.f_type),
        static_cast<unsigned long long>(cold->resident_bytes),
        static_cast<unsigned long long>(total));
    EXPECT_LE(cold->resident_bytes, total);
  }
}

TEST_F(PageCacheTest, AStopEndsThePrewarmWithWhatItRead) {
  std::vector<std::string> files = {Write("a", 2 << 20)};
  std::atomic<bool> stop{true};
  PrewarmOptions o;
  o.stop = &stop;
  auto read = Prewarm(files, o);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, 0u);
}

TEST_F(PageCacheTest, WhatIsNotARegularFileIsAnErrorNamingIt) {
  std::string missing = dir_ + "/missing";
  for (auto* call :
       {+[](const std::vector<std::string>& f) { return Prewarm(f).status(); },
        +[](const std::vector<std::string>& f) { return PageCacheResidency(f).status(); },
        +[](const std::vector<std::string>& f) { return Evict(f); }}) {
    Status s = call({missing});
    EXPECT_EQ(s.code(), Status::Code::kNotFound) << s.message();
    EXPECT_THAT(s.message(), HasSubstr(missing));
    s = call({dir_});
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.message();
    EXPECT_THAT(s.message(), HasSubstr(dir_));
  }
}

// The weights a prewarm reads: every *.safetensors under the snapshot, through the store's
// links into its blobs, in name order; nothing else; a missing snapshot is NotFound.
TEST_F(PageCacheTest, TheSnapshotsSafetensorsAreTheWeightsFollowingLinks) {
  namespace fs = std::filesystem;
  fs::create_directories(dir_ + "/blobs");
  fs::create_directories(dir_ + "/snap/sub");
  Write("blobs/b1", 10);
  Write("blobs/b2", 20);
  Write("blobs/b3", 30);
  fs::create_symlink("../blobs/b1", dir_ + "/snap/model-00002.safetensors");
  fs::create_symlink("../blobs/b2", dir_ + "/snap/model-00001.safetensors");
  fs::create_symlink("../../blobs/b3", dir_ + "/snap/sub/extra.safetensors");
  fs::create_symlink("../blobs/b1", dir_ + "/snap/config.json");
  fs::create_symlink("../blobs/missing", dir_ + "/snap/dangling.safetensors");
  auto files = SafetensorsFiles(dir_ + "/snap");
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_THAT(*files, ::testing::ElementsAre(dir_ + "/snap/model-00001.safetensors",
                                             dir_ + "/snap/model-00002.safetensors",
                                             dir_ + "/snap/sub/extra.safetensors"));
  auto none = SafetensorsFiles(dir_ + "/nothing");
  EXPECT_EQ(none.status().code(), Status::Code::kNotFound);
}

// A prewarm reads only the model's files: links out of the repository folder (a device that
// never ends, a secret, a file elsewhere) are skipped, so nothing outside the store is read
// and nothing blocks (issue 37, 7). A deadline already past reads nothing.
TEST_F(PageCacheTest, APrewarmReadsNothingALinkLeadsToOutsideTheRepository) {
  namespace fs = std::filesystem;
  const std::string repo = dir_ + "/models--org--m";
  const std::string snap = repo + "/snapshots/c1";
  fs::create_directories(repo + "/blobs");
  fs::create_directories(snap);
  Write("models--org--m/blobs/b1", 10);
  Write("outside.safetensors", 20);
  fs::create_symlink("../../blobs/b1", snap + "/model-00001.safetensors");
  fs::create_symlink("/proc/kmsg", snap + "/model-00002.safetensors");
  fs::create_symlink("/etc/shadow", snap + "/model-00003.safetensors");
  fs::create_symlink(dir_ + "/outside.safetensors", snap + "/model-00004.safetensors");
  fs::create_symlink("../../../outside.safetensors", snap + "/model-00005.safetensors");
  auto files = SafetensorsFiles(snap);
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_THAT(*files, ::testing::ElementsAre(snap + "/model-00001.safetensors"));
  auto read = Prewarm(*files);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, 10u);
  PrewarmOptions late;
  late.deadline = std::chrono::steady_clock::now();
  auto none = Prewarm(*files, late);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_EQ(*none, 0u);
}

// llama-server's GGUF: the one file the service names, under the same rule (a regular file
// inside the repository once links are followed; nothing else is read).
TEST_F(PageCacheTest, AGgufPrewarmReadsTheNamedFileOfTheSnapshotOnly) {
  namespace fs = std::filesystem;
  const std::string repo = dir_ + "/models--org--g";
  const std::string snap = repo + "/snapshots/c1";
  fs::create_directories(repo + "/blobs");
  fs::create_directories(snap + "/Q4");
  Write("models--org--g/blobs/b1", 30);
  Write("outside.gguf", 20);
  fs::create_symlink("../../../blobs/b1", snap + "/Q4/m.gguf");
  fs::create_symlink("/etc/shadow", snap + "/shadow.gguf");
  fs::create_symlink(dir_ + "/outside.gguf", snap + "/out.gguf");
  auto files = PrewarmFiles(snap, "Q4/m.gguf");
  ASSERT_TRUE(files.ok()) << files.status().message();
  EXPECT_THAT(*files, ::testing::ElementsAre(snap + "/Q4/m.gguf"));
  auto read = Prewarm(*files);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(*read, 30u);
  for (const char* bad : {"shadow.gguf", "out.gguf", "../../../outside.gguf", "missing.gguf", "Q4"})
    EXPECT_EQ(PrewarmFiles(snap, bad).status().code(), Status::Code::kNotFound) << bad;
  EXPECT_EQ(PrewarmFiles(snap, "").status().code(), Status::Code::kOk);  // its safetensors
}

}  // namespace
}  // namespace berth
