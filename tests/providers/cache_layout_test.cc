#include "providers/hub/cache_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

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
