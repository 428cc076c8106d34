#include "providers/hub/cache_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <future>

#include "core/hash.h"
#include "providers/hub/pull.h"
#include "providers/store/store_scan.h"
#include "tests/providers/temp_dir.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kSha1 = std::string(40, 'a');
const std::string kSha256 = std::string(64, 'b');

RepoSnapshot Tiny() {
  RepoSnapshot snap;
  snap.repo_id = "org/tiny";
  snap.revision = "main";
  snap.commit = kCommit;
  HubFileEntry config;
  config.path = "config.json";
  config.size = 3;
  config.git_oid = kSha1;
  HubFileEntry weights;
  weights.path = "sub/model.safetensors";
  weights.size = 5;
  weights.git_oid = std::string(40, 'c');
  weights.lfs_sha256 = kSha256;
  snap.files = {config, weights};
  return snap;
}

TEST(CacheLayout, APublishedSnapshotReadsBackAsTheStoreScanAndVerifySeeIt) {
  testing::TempDir store;
  CacheLayout layout(store.path(), "org/tiny");
  ASSERT_TRUE(layout.MakeDirs().ok());
  store.Write("models--org--tiny/blobs/" + kSha1, "abc");
  store.Write("models--org--tiny/blobs/" + kSha256, "12345");
  RepoSnapshot snap = Tiny();
  ASSERT_TRUE(layout.Publish(snap, snap.files).ok());

  EXPECT_EQ(std::filesystem::read_symlink(layout.SnapshotDir(kCommit) + "/sub/model.safetensors"),
            "../../../blobs/" + kSha256);
  Result<std::string> commit = layout.ReadRef("main");
  ASSERT_TRUE(commit.ok()) << commit.status().message();
  EXPECT_EQ(*commit, kCommit);
  EXPECT_EQ(*layout.ReadRef(kCommit), kCommit) << "a commit is its own answer";

  Result<SnapshotRecord> record = layout.ReadRecord(kCommit);
  ASSERT_TRUE(record.ok()) << record.status().message();
  EXPECT_EQ(record->repo_id, "org/tiny");
  EXPECT_EQ(record->bytes_total, 8u);
  ASSERT_EQ(record->files.size(), 2u);
  HubFileEntry back = HubFileOf(record->files[1]);
  EXPECT_EQ(back.path, "sub/model.safetensors");
  EXPECT_EQ(back.etag(), kSha256);
  EXPECT_TRUE(back.is_lfs());
  EXPECT_FALSE(HubFileOf(record->files[0]).is_lfs());

  // What berth verify checks against, from the store alone.
  Result<RepoSnapshot> recorded = RecordedSnapshot(store.path(), "org/tiny", "main");
  ASSERT_TRUE(recorded.ok()) << recorded.status().message();
  EXPECT_EQ(recorded->commit, kCommit);
  ASSERT_EQ(recorded->files.size(), 2u);
  EXPECT_EQ(recorded->files[0].etag(), kSha1);
  EXPECT_EQ(recorded->files[1].etag(), kSha256);
  EXPECT_EQ(RecordedSnapshot(store.path(), "org/tiny", "v2").status().code(),
            Status::Code::kNotFound);

  // The store scan reads the same record and finds the revision complete.
  Result<ObservedStore> scanned = ScanStore(store.path());
  ASSERT_TRUE(scanned.ok());
  ASSERT_EQ(scanned->repos.size(), 1u);
  EXPECT_TRUE(scanned->repos[0].revisions[0].complete);
  EXPECT_EQ(scanned->repos[0].revisions[0].bytes_total, 8u);
}

// A store whose snapshot holds what berth never writes there: verify hashes only regular files
// of the repo's blobs/, flags every other link with its path, walks no folder link and never
// opens a FIFO. Each hostile file holds exactly the right bytes, so only where it is gives it
// away (followed, it would verify). VerifySnapshot runs aside with a deadline: a FIFO that
// blocked it fails the test instead of hanging it.
class HostileSnapshot : public ::testing::Test {
 protected:
  HostileSnapshot() : layout_(store_.path(), "org/tiny") {
    snap_.repo_id = "org/tiny";
    snap_.revision = "main";
    snap_.commit = kCommit;
    EXPECT_TRUE(layout_.MakeDirs().ok());
    EXPECT_TRUE(layout_.BeginSnapshot(kCommit).ok());
  }
  /// A file of the snapshot, `content` recorded as an LFS blob.
  HubFileEntry& Add(const std::string& path, const std::string& content) {
    HubFileEntry f;
    f.path = path;
    f.size = content.size();
    f.lfs_sha256 = Sha256Hex(content);
    snap_.files.push_back(f);
    return snap_.files.back();
  }
  std::string Snap(const std::string& rel) const {
    return layout_.SnapshotDir(kCommit) + "/" + rel;
  }
  Result<VerifyReport> Verify() {
    auto run = std::async(std::launch::async,
                          [&] { return VerifySnapshot(store_.path(), snap_, snap_.files); });
    if (run.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "berth verify blocked";
      std::abort();  // the thread cannot be cancelled; the binary must not hang
    }
    return run.get();
  }

  testing::TempDir store_, outside_;
  CacheLayout layout_;
  RepoSnapshot snap_;
};

TEST_F(HostileSnapshot, OnlyLinksIntoTheReposBlobsAreHashedAndEveryOtherIsFlaggedWithItsPath) {
  const std::string good = "{\"architectures\": []}";
  store_.Write("models--org--tiny/blobs/" + Add("config.json", good).etag(), good);
  store_.Link("../../blobs/" + Sha256Hex(good),
              "models--org--tiny/snapshots/" + kCommit + "/config.json");
  // A link out of the store to a file with exactly the right bytes.
  const std::string weights = "12345";
  outside_.Write("weights", weights);
  Add("model.safetensors", weights);
  std::filesystem::create_symlink(outside_ / "weights", Snap("model.safetensors"));
  // A relative link that climbs out of the repo.
  const std::string tok = "tokens";
  Add("tokenizer.json", tok);
  outside_.Write("tokenizer.json", tok);
  std::filesystem::create_symlink(
      "../../../../../../../../../.." + outside_.path() + "/tokenizer.json",
      Snap("tokenizer.json"));
  // A link into blobs/ whose blob is a FIFO.
  const std::string gen = "generation";
  HubFileEntry& fifo = Add("generation_config.json", gen);
  ASSERT_EQ(::mkfifo(layout_.BlobPath(fifo.etag()).c_str(), 0644), 0);
  store_.Link("../../blobs/" + fifo.etag(),
              "models--org--tiny/snapshots/" + kCommit + "/generation_config.json");
  // A folder of the snapshot linked out of the store, holding the right file.
  const std::string vocab = "vocab";
  Add("sub/vocab.txt", vocab);
  outside_.Write("dir/vocab.txt", vocab);
  outside_.Write("dir/passwd", "root:x:0:0");
  std::filesystem::create_symlink(outside_ / "dir", Snap("sub"));

  Result<VerifyReport> report = Verify();
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_THAT(report->ok, ::testing::ElementsAre("config.json"));
  ASSERT_EQ(report->corrupt.size(), 4u) << ::testing::PrintToString(report->corrupt);
  EXPECT_THAT(report->corrupt[0],
              HasSubstr("model.safetensors (a link to '" + outside_ / "weights" +
                        "', outside the repo's blobs/ (berth neither follows nor hashes it))"));
  EXPECT_THAT(report->corrupt[1], HasSubstr("tokenizer.json (a link to '../../"));
  EXPECT_THAT(report->corrupt[2],
              HasSubstr("generation_config.json (" + layout_.BlobPath(fifo.etag()) +
                        " is not a regular file (it is a FIFO)"));
  EXPECT_THAT(report->corrupt[3],
              HasSubstr("sub/vocab.txt (sub is a symbolic link to '" + outside_ / "dir" +
                        "'; berth follows no folder link in a snapshot)"));
  // The folder link is listed, not walked: nothing of the outside folder appears.
  EXPECT_THAT(report->extra, ::testing::ElementsAre("sub"));
}

TEST_F(HostileSnapshot, ASnapshotFolderLinkedOutOfTheStoreIsNotWalked) {
  const std::string good = "{}";
  Add("config.json", good);
  outside_.Write("config.json", good);
  std::filesystem::remove(layout_.SnapshotDir(kCommit));
  std::filesystem::create_symlink(outside_.path(), layout_.SnapshotDir(kCommit));
  Result<VerifyReport> report = Verify();
  ASSERT_FALSE(report.ok());
  EXPECT_THAT(report.status().message(),
              HasSubstr(layout_.SnapshotDir(kCommit) + " is a symbolic link to '" +
                        outside_.path() + "', not a folder of the store"));
}

TEST_F(HostileSnapshot, AFileCopiedIntoTheSnapshotIsHashedWhereItIs) {
  // huggingface_hub without symlinks moves the blob into the snapshot: a regular file there.
  const std::string good = "{}";
  Add("config.json", good);
  store_.Write("models--org--tiny/snapshots/" + kCommit + "/config.json", good);
  Result<VerifyReport> report = Verify();
  ASSERT_TRUE(report.ok()) << report.status().message();
  EXPECT_THAT(report->ok, ::testing::ElementsAre("config.json"));
  EXPECT_TRUE(report->corrupt.empty()) << ::testing::PrintToString(report->corrupt);
}

TEST(CacheLayout, AShortCommitAsBerthPrintsItNamesTheOneSnapshotItStarts) {
  testing::TempDir store;
  CacheLayout layout(store.path(), "org/tiny");
  ASSERT_TRUE(layout.MakeDirs().ok());
  ASSERT_TRUE(layout.BeginSnapshot(kCommit).ok());
  EXPECT_EQ(*layout.ReadRef("0123456"), kCommit);
  EXPECT_EQ(*layout.ReadRef("0123456789abcdef"), kCommit);
  // Too short, not hex, or no snapshot: the ref is missing, as before.
  EXPECT_EQ(layout.ReadRef("012345").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(layout.ReadRef("fedcba9").status().code(), Status::Code::kNotFound);
  // Two snapshots start the same way: ambiguous, so no answer rather than a guess.
  ASSERT_TRUE(layout.BeginSnapshot("0123456789abcdef0123456789abcdef0123456f").ok());
  EXPECT_EQ(layout.ReadRef("0123456").status().code(), Status::Code::kNotFound);
  // A ref of that name wins, as git's does.
  store.Write("models--org--tiny/refs/0123456", kCommit);
  EXPECT_EQ(*layout.ReadRef("0123456"), kCommit);
}

TEST(CacheLayout, MissingAndDamagedRefsAndRecordsSaySo) {
  testing::TempDir store;
  CacheLayout layout(store.path(), "org/tiny");
  EXPECT_EQ(layout.ReadRef("main").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(layout.ReadRecord(kCommit).status().code(), Status::Code::kNotFound);

  store.Write("models--org--tiny/refs/main", "not a commit");
  EXPECT_EQ(layout.ReadRef("main").status().code(), Status::Code::kInvalidArgument);
  store.Write("models--org--tiny/refs/main", kCommit + "\n");  // an editor's newline
  EXPECT_EQ(*layout.ReadRef("main"), kCommit);

  store.Write("models--org--tiny/.berth/" + kCommit + ".json", "{truncated");
  Result<SnapshotRecord> damaged = layout.ReadRecord(kCommit);
  EXPECT_EQ(damaged.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(damaged.status().message(), HasSubstr(layout.RecordPath(kCommit)));

  const std::string other(40, 'd');
  store.Write("models--org--tiny/.berth/" + kCommit + ".json",
              R"({"commit":")" + other + R"(","files":[]})");
  EXPECT_THAT(layout.ReadRecord(kCommit).status().message(), HasSubstr("the record of " + other));
}

}  // namespace
}  // namespace berth
