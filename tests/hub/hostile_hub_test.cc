// A Hub that lies: every value it gives that could name a path, size a buffer or drive a loop is
// refused with an error naming the repo, the file and the field, and nothing is written outside
// the store. Also the store's own links: berth never writes or removes through one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "providers/hub/cache_layout.h"
#include "providers/hub/hub_api.h"
#include "providers/hub/pull.h"
#include "tests/hub/fake_hub_server.h"

namespace berth::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

const std::string kTiny = std::string(39, 'a') + "1";

class HostileHubTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/berth-hostile-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    hub_ = new FakeHubServer;
    if (!hub_->Start(dir_, (5ull << 20) + 3, {}, &error_)) {
      delete hub_;
      hub_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete hub_;
    hub_ = nullptr;
    fs::remove_all(dir_);
  }
  void SetUp() override {
    ASSERT_NE(hub_, nullptr) << "the fake Hub did not start: " << error_;
    hub_->Reset();
    // The store two levels below a folder of its own: "../../../x" from blobs/ or from
    // .locks/<repo>/ lands in `outside_`, which must stay as it was.
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    outside_ = dir_ + "/" + name;
    store_ = outside_ + "/store";
    fs::create_directories(outside_ + "/elsewhere");
    Write(outside_ + "/elsewhere/keep.txt", "not berth's");
    opts_.endpoint = hub_->api();
    opts_.parallel_threshold = 1 << 20;
    opts_.chunk_bytes = 1 << 20;
    opts_.connections = 4;
    opts_.max_attempts = 2;
    opts_.backoff_ms = 10;
    opts_.max_backoff_ms = 50;
  }
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  Result<PullResult> Pull(const std::string& repo = "org/tiny") {
    PullRequest req;
    req.store = store_;
    req.repo_id = repo;
    return PullModel(req, opts_);
  }
  /// Every path below `outside_` but outside the store, with its size (-1 for a folder, -2 for
  /// a link), and the same of /tmp's top level.
  std::map<std::string, long long> Outside() const {
    std::map<std::string, long long> seen;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(outside_, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      std::string p = it->path().string();
      if (p == store_) {
        it.disable_recursion_pending();
        continue;
      }
      struct stat st;
      ::lstat(p.c_str(), &st);
      seen[p] = S_ISLNK(st.st_mode)   ? -2
                : S_ISDIR(st.st_mode) ? -1
                                      : static_cast<long long>(st.st_size);
    }
    for (const auto& e : fs::directory_iterator(dir_, ec))
      if (e.path().filename() != "hub.log") seen[e.path().string()] = 0;
    return seen;
  }
  /// Pulls, expects an error saying all of `words`, and nothing new outside the store.
  Status PullRefused(const std::vector<std::string>& words, const std::string& repo = "org/tiny") {
    auto before = Outside();
    auto r = Pull(repo);
    EXPECT_FALSE(r.ok());
    if (r.ok()) return Status::Ok();
    for (const auto& w : words) EXPECT_THAT(r.status().message(), HasSubstr(w));
    EXPECT_EQ(Outside(), before) << "something was written outside the store";
    return r.status();
  }

  static FakeHubServer* hub_;
  static std::string dir_, error_;
  std::string outside_, store_;
  HubOptions opts_;
};

FakeHubServer* HostileHubTest::hub_ = nullptr;
std::string HostileHubTest::dir_, HostileHubTest::error_;

// The tree's oid names the blob of a regular file: "../../../x" would have put the lock and the
// partial file outside the store.
TEST_F(HostileHubTest, ARegularFilesOidThatIsNotAGitSha1IsRefused) {
  hub_->Fault(R"({"kind": "bad_oid", "file": "config.json"})");
  PullRefused({"org/tiny", "config.json", "oid", "not a git blob sha1", "nothing was written"});
  EXPECT_FALSE(fs::exists(store_ + "/models--org--tiny/blobs"));
}

TEST_F(HostileHubTest, AnLfsFilesOidThatIsNotASha256IsRefused) {
  hub_->Fault(R"({"kind": "bad_oid", "file": "model.safetensors"})");
  PullRefused({"org/tiny", "model.safetensors", "lfs.oid", "not a sha256"});
  hub_->Reset();
  hub_->Fault(R"({"kind": "bad_oid", "file": "model.safetensors", "oid": ")" +
              std::string(64, 'A') + "\"}");
  PullRefused({"model.safetensors", "lfs.oid"});  // upper case is not how the Hub writes it
}

// The old hole: an etag naming /etc/passwd with its size was "already present" and the snapshot
// linked to it.
TEST_F(HostileHubTest, AnOidNamingAFileOutsideTheStoreIsNeverLinked) {
  struct stat st;
  ASSERT_EQ(::stat("/etc/passwd", &st), 0);
  hub_->Fault(R"({"kind": "bad_oid", "file": "config.json", "oid": ")" + std::string(16, '.') +
              "/../../../../../../../../../../../etc/passwd\", \"size\": " +
              std::to_string(st.st_size) + "}");
  PullRefused({"config.json", "oid"});
  EXPECT_FALSE(fs::exists(store_ + "/models--org--tiny/snapshots/" + kTiny + "/config.json"));
}

TEST_F(HostileHubTest, AHeaderEtagThatDisagreesWithTheTreeIsRefused) {
  hub_->Fault(R"({"kind": "bad_etag", "path": "*config.json"})");
  PullRefused({"config.json of org/tiny", "ETag", "'../../../x'", "listing"});
  EXPECT_FALSE(fs::exists(store_ + "/models--org--tiny/snapshots/" + kTiny + "/config.json"));
  hub_->Reset();
  hub_->Fault(R"({"kind": "bad_etag", "path": "*model.safetensors", "etag": ")" +
              std::string(64, 'f') + "\"}");
  PullRefused({"model.safetensors of org/tiny", "X-Linked-Etag", "sha256"});
  EXPECT_FALSE(fs::exists(store_ + "/models--org--tiny/blobs/" + std::string(64, 'f')));
}

TEST_F(HostileHubTest, SizeHeadersThatAreNotNumbersEndInAnErrorNotAnAbort) {
  for (const char* size : {"abc", "12345678901234567890123", "-1", "1e9", ""}) {
    hub_->Reset();
    hub_->Fault(R"({"kind": "bad_linked_size", "path": "*model.safetensors", "size": ")" +
                std::string(size) + "\"}");
    auto r = Pull();
    if (std::string(size).empty()) continue;  // no header: the listing's size stands
    ASSERT_FALSE(r.ok()) << size;
    EXPECT_THAT(r.status().message(),
                AllOf(HasSubstr("model.safetensors of org/tiny"), HasSubstr("X-Linked-Size")))
        << size;
  }
}

TEST_F(HostileHubTest, TreeSizesBeyondTwoToTheFiftyAreRefused) {
  for (const char* size : {"9223372036854775808", "18446744073709551615", "10000000000000000000000",
                           "-5", "1.5", "\"12\""}) {
    hub_->Reset();
    hub_->Fault(R"({"kind": "bad_size", "file": "model.safetensors", "size": )" +
                std::string(size) + "}");
    PullRefused({"model.safetensors", "size", "nothing was written"});
  }
}

TEST_F(HostileHubTest, APaginationLoopIsDetectedAtOnce) {
  hub_->Fault(R"({"kind": "link_loop"})");
  PullRefused({"listing org/tiny", "pagination loops"});
  int pages = 0;
  for (const auto& e : hub_->Log())
    pages += e["path"].get<std::string>().find("/tree/") != std::string::npos;
  EXPECT_EQ(pages, 1) << "the second fetch of the same page is never made";
  hub_->Reset();
  hub_->Fault(R"({"kind": "link_loop", "mode": "cursor"})");
  PullRefused({"listing org/tiny", "pagination loops"});
}

// A next page on another protocol is refused by the one HTTP layer (http and https only), like a
// redirect to one (HubTest.ARedirectToAnotherProtocolIsRefusedNotRetried; the redirect cap:
// HubTest.ARedirectLoopOnTheHubEndsAfterTenHops).
TEST_F(HostileHubTest, ANextPageOnAnotherProtocolIsRefused) {
  for (const char* next : {"file:///etc/passwd", "ftp://127.0.0.1:1/page"}) {
    hub_->Reset();
    hub_->Fault(R"({"kind": "link_loop", "mode": "next", "next": ")" + std::string(next) + R"("})");
    PullRefused({"listing org/tiny"});
  }
}

// A link planted at blobs/ (or .locks/, snapshots/<commit>/) would have berth write wherever it
// points.
TEST_F(HostileHubTest, BerthNeverWritesThroughALinkInTheStore) {
  std::string repo = store_ + "/models--org--tiny";
  for (const std::string& planted : {repo + "/blobs", repo + "/snapshots/" + kTiny}) {
    fs::remove_all(store_);
    fs::create_directories(fs::path(planted).parent_path());
    fs::create_directory_symlink(outside_ + "/elsewhere", planted);
    auto before = Outside();
    auto r = Pull();
    ASSERT_FALSE(r.ok()) << planted;
    EXPECT_THAT(r.status().message(), AllOf(HasSubstr(planted), HasSubstr("symlink")));
    EXPECT_EQ(Outside(), before);
  }
}

// A blob that is a link (to a file outside of the right size) is not taken for the blob: the
// download replaces the link and leaves the file alone.
TEST_F(HostileHubTest, ABlobThatIsALinkIsDownloadedAgainNotTrusted) {
  auto first = Pull();
  ASSERT_TRUE(first.ok()) << first.status().message();
  const HubFileEntry* config = nullptr;
  for (const auto& f : first->files)
    if (f.path == "config.json") config = &f;
  ASSERT_NE(config, nullptr);
  std::string blob = store_ + "/models--org--tiny/blobs/" + config->etag();
  std::string decoy = outside_ + "/elsewhere/decoy";
  Write(decoy, std::string(config->size, 'x'));
  fs::remove(blob);
  fs::create_symlink(decoy, blob);
  fs::remove_all(store_ + "/models--org--tiny/.berth");
  auto again = Pull();
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_FALSE(fs::is_symlink(blob));
  EXPECT_EQ(fs::file_size(blob), config->size);
  std::ifstream in(decoy);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, std::string(config->size, 'x')) << "the decoy was not written";
  auto report = VerifySnapshot(store_, again->snapshot, again->files);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->corrupt.empty()) << ::testing::PrintToString(report->corrupt);
}

// RemoveRevision takes only a commit, removes only inside the repo, and a snapshot folder that
// is a link loses the link, not what it points at.
TEST_F(HostileHubTest, RemoveRevisionRemovesOnlyACommitInsideTheRepo) {
  auto r = Pull();
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const std::string& bad :
       std::vector<std::string>{"../../../elsewhere", "..", "", "main", std::string(40, 'A')})
    EXPECT_FALSE(RemoveRevision(store_, "org/tiny", bad).ok()) << bad;
  EXPECT_TRUE(fs::exists(outside_ + "/elsewhere/keep.txt"));
  std::string other = std::string(39, 'c') + "3";
  std::string snaps = store_ + "/models--org--tiny/snapshots/";
  fs::create_directory_symlink(outside_ + "/elsewhere", snaps + other);
  // A link in a snapshot whose last name is "..": no blob of ours.
  fs::create_symlink("../../blobs/..", snaps + kTiny + "/odd");
  auto before = Outside();
  auto freed = RemoveRevision(store_, "org/tiny", other);
  ASSERT_TRUE(freed.ok()) << freed.status().message();
  EXPECT_FALSE(fs::exists(snaps + other));
  EXPECT_EQ(Outside(), before);
  EXPECT_TRUE(fs::exists(outside_ + "/elsewhere/keep.txt"));
  auto gone = RemoveRevision(store_, "org/tiny", kTiny);
  ASSERT_TRUE(gone.ok()) << gone.status().message();
  EXPECT_TRUE(fs::exists(store_ + "/models--org--tiny/blobs")) << "the repo stays";
  EXPECT_FALSE(fs::exists(snaps + kTiny));
}

// Refs are read back only when they hold a commit.
TEST_F(HostileHubTest, ARefThatHoldsNoCommitIsRefused) {
  CacheLayout layout(store_, "org/tiny");
  ASSERT_TRUE(layout.MakeDirs().ok());
  Write(store_ + "/models--org--tiny/refs/main", "../../../../etc");
  auto ref = layout.ReadRef("main");
  ASSERT_FALSE(ref.ok());
  EXPECT_THAT(ref.status().message(), HasSubstr("does not hold a commit"));
  EXPECT_FALSE(layout.ReadRef("../x").ok());
  EXPECT_FALSE(RecordedSnapshot(store_, "org/tiny", "main").ok());
}

}  // namespace
}  // namespace berth::testing
