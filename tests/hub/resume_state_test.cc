// What a new run finds of a blob in blobs/<etag>.incomplete: the chunk map, a one-stream prefix
// (huggingface_hub's own partial files), and the bytes of chunks a kill -9 cut short.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "providers/hub/resume_state.h"

namespace berth::testing {
namespace {

constexpr uint64_t kChunk = 1 << 20;
constexpr uint64_t kSize = 5 * kChunk + 100;  // 6 chunks, the last one short

class ResumeStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/var/tmp/berth-resume-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/blob.incomplete";
    map_ = path_ + ".berth";
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
    std::filesystem::remove_all(dir_);
  }
  /// The partial file with `bytes` written at `offset`, sized `size` (sparse beyond).
  void Write(uint64_t offset, uint64_t bytes, uint64_t size) {
    if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT, 0644);
    ASSERT_EQ(::ftruncate(fd_, static_cast<off_t>(size)), 0);
    std::vector<char> data(bytes, 'x');
    ASSERT_EQ(::pwrite(fd_, data.data(), data.size(), static_cast<off_t>(offset)),
              static_cast<ssize_t>(bytes));
  }
  ResumeState Load(uint64_t threshold = kChunk) {
    struct stat st;
    bool had = ::stat(path_.c_str(), &st) == 0;
    if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT, 0644);
    return LoadResumeState(fd_, had, had ? static_cast<uint64_t>(st.st_size) : 0, kSize, threshold,
                           kChunk, map_);
  }
  std::string dir_, path_, map_;
  int fd_ = -1;
};

TEST_F(ResumeStateTest, NothingOnDiskIsAllPending) {
  ResumeState s = Load();
  EXPECT_TRUE(s.chunked);
  EXPECT_EQ(s.chunks.size(), 6u);
  EXPECT_EQ(s.ResumedBytes(), 0u);
  EXPECT_EQ(s.Watermark(), 0u);
  EXPECT_EQ(s.ChunkEnd(5), kSize);
}

TEST_F(ResumeStateTest, TheChunkMapSaysWhichChunksAreDone) {
  ResumeState s = Load();
  s.chunks[0] = s.chunks[2] = s.chunks[5] = ChunkState::kDone;
  SaveChunkMap(s, map_);
  Write(0, kSize, kSize);
  ResumeState again = Load();
  EXPECT_EQ(again.chunks[0], ChunkState::kDone);
  EXPECT_EQ(again.chunks[1], ChunkState::kPending);
  EXPECT_EQ(again.chunks[2], ChunkState::kDone);
  EXPECT_EQ(again.chunks[5], ChunkState::kDone);
  EXPECT_EQ(again.Watermark(), kChunk) << "hashed up to the first chunk not done";
  EXPECT_GE(again.ResumedBytes(), 2 * kChunk + 100);
}

TEST_F(ResumeStateTest, AMapOfAnotherChunkSizeKeepsItsChunks) {
  // An earlier run with other options (fewer connections) chose 2 MiB chunks.
  std::ofstream(map_) << kSize << " " << 2 * kChunk << "\n0\n2\n";
  Write(0, kSize, kSize);
  ResumeState s = Load();
  EXPECT_EQ(s.chunk, 2 * kChunk);
  ASSERT_EQ(s.chunks.size(), 3u);
  EXPECT_EQ(s.chunks[0], ChunkState::kDone);
  EXPECT_EQ(s.chunks[1], ChunkState::kPending);
  EXPECT_EQ(s.chunks[2], ChunkState::kDone);
  EXPECT_EQ(s.ChunkEnd(2), kSize);
}

TEST_F(ResumeStateTest, AnAbsurdMapIsNotBelieved) {
  std::ofstream(map_) << kSize << " 1\n0\n1\n";  // a billion chunks for a big file: no
  Write(0, kChunk / 2, kSize);                   // sparse after half a chunk
  ResumeState s = Load();
  EXPECT_EQ(s.chunk, kChunk);
  EXPECT_EQ(s.chunks[0], ChunkState::kPending);
  EXPECT_EQ(s.chunks[1], ChunkState::kPending);
}

TEST_F(ResumeStateTest, APrefixWithoutAMapCountsUpToItsFirstHole) {
  Write(0, 2 * kChunk + 4096, kSize);  // the rest of the file is a hole
  ResumeState s = Load();
  EXPECT_EQ(s.chunks[0], ChunkState::kDone);
  EXPECT_EQ(s.chunks[1], ChunkState::kDone);
  EXPECT_EQ(s.chunks[2], ChunkState::kPending) << "a sparse file is never taken for data";
}

TEST_F(ResumeStateTest, AOneStreamFileResumesAtTheEndOfItsPrefix) {
  Write(0, 12345, 12345);
  ResumeState s = Load(/*threshold=*/kSize + 1);
  EXPECT_FALSE(s.chunked);
  EXPECT_EQ(s.resume_at, 12345u);
  EXPECT_EQ(s.ResumedBytes(), 12345u);
}

TEST_F(ResumeStateTest, AOneStreamFileCompleteButNotRenamedIsDone) {
  Write(0, kSize, kSize);
  ResumeState s = Load(/*threshold=*/kSize + 1);
  EXPECT_TRUE(s.AllDone());
  EXPECT_EQ(s.ResumedBytes(), kSize);
}

TEST_F(ResumeStateTest, AChunkCutShortKeepsWhatTheFileSystemHoldsLessABlock) {
  ResumeState s = Load();
  s.chunks[0] = ChunkState::kDone;
  SaveChunkMap(s, map_);
  Write(0, kChunk, kSize);              // chunk 0, done
  Write(kChunk, 5 * 4096 + 10, kSize);  // chunk 1 cut short after 5 blocks and a bit
  ResumeState again = Load();
  struct stat st;
  ASSERT_EQ(::fstat(fd_, &st), 0);
  uint64_t block = static_cast<uint64_t>(st.st_blksize);
  const uint64_t cut = 5 * 4096 + 10;
  EXPECT_LE(again.salvaged[1], cut) << "never more than was written";
  EXPECT_GE(again.salvaged[1] + 2 * block, cut) << "at most the last block or two fetched again";
  EXPECT_EQ(again.salvaged[1] % block, 0u);
  EXPECT_EQ(again.salvaged[2], 0u);
  again.Restart();
  EXPECT_EQ(again.ResumedBytes(), 0u);
  EXPECT_FALSE(again.AllDone());
}

}  // namespace
}  // namespace berth::testing
