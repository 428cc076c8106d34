// The Hub client and the store against the fake Hub on loopback: the cache layout, parallel
// ranged downloads, every fault ending in a verified store, errors that say what to do, a
// killed download resuming, and a full disk.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <fstream>
#include <thread>

#include "engine/cli/commands.h"
#include "providers/hub/hub_api.h"
#include "providers/hub/pull.h"
#include "providers/store/store_scan.h"
#include "tests/hub/fake_hub_server.h"
#include "tests/hub/space_fs.h"
#include "tests/support/systemd_sandbox.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr uint64_t kBigSize = (24ull << 20) + 12345;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class HubTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/berth-hub-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    hub_ = new FakeHubServer;
    if (!hub_->Start(dir_, kBigSize, {"--token", "hf_good", "--gated", "org/gated"}, &error_)) {
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
    store_ = dir_ + "/store-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    opts_.endpoint = hub_->api();
    opts_.token = "hf_good";
    opts_.parallel_threshold = 4 << 20;  // the big file goes in 1 MiB chunks over 8 connections
    opts_.chunk_bytes = 1 << 20;
    opts_.connections = 8;
    opts_.backoff_ms = 20;
    opts_.max_backoff_ms = 300;
  }
  Result<PullResult> Pull(const std::string& repo, const std::string& revision = "main",
                          StoreFs* fs = nullptr) {
    PullRequest req;
    req.store = store_;
    req.repo_id = repo;
    req.revision = revision;
    req.fs = fs;
    return PullModel(req, opts_);
  }
  /// Every file of the snapshot re-hashed against the fake's own record of it.
  void ExpectVerified(const PullResult& r) {
    auto report = VerifySnapshot(store_, r.snapshot, r.files);
    ASSERT_TRUE(report.ok()) << report.status().message();
    EXPECT_EQ(report->ok.size(), r.files.size());
    EXPECT_TRUE(report->corrupt.empty()) << ::testing::PrintToString(report->corrupt);
    EXPECT_TRUE(report->missing.empty());
    EXPECT_TRUE(report->extra.empty()) << ::testing::PrintToString(report->extra);
  }
  void ExpectNoTokenReachedTheCdn() {
    auto v = nlohmann::json::parse(hub_->Control("GET", "/_fake/violations"));
    EXPECT_TRUE(v.empty()) << v.dump();
    bool any_cdn = false;
    for (const auto& e : hub_->Log())
      if (e["port"] == "cdn") {
        any_cdn = true;
        EXPECT_FALSE(e["authorization"].get<bool>()) << e.dump();
      }
    EXPECT_TRUE(any_cdn);
  }

  static FakeHubServer* hub_;
  static std::string dir_, error_;
  std::string store_;
  HubOptions opts_;
};

FakeHubServer* HubTest::hub_ = nullptr;
std::string HubTest::dir_, HubTest::error_;

TEST_F(HubTest, APullWritesTheHuggingFaceCacheLayout) {
  auto r = Pull("org/tiny");
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::string commit = std::string(39, 'a') + "1";
  EXPECT_EQ(r->snapshot.commit, commit);
  std::string repo = store_ + "/models--org--tiny";
  EXPECT_EQ(ReadAll(repo + "/refs/main"), commit) << "refs hold the commit without a newline";
  auto info = hub_->Info();
  for (const auto& f : r->files) {
    std::string link = repo + "/snapshots/" + commit + "/" + f.path;
    std::string depth;
    for (char c : f.path)
      if (c == '/') depth += "../";
    EXPECT_EQ(fs::read_symlink(link).string(), depth + "../../blobs/" + f.etag()) << f.path;
    struct stat st;
    ASSERT_EQ(::stat((repo + "/blobs/" + f.etag()).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0644u);
  }
  EXPECT_TRUE(fs::exists(repo + "/.berth/" + commit + ".json"));
  EXPECT_TRUE(fs::exists(store_ + "/.locks/models--org--tiny"));
  EXPECT_THAT(info.dump(), HasSubstr(r->files[0].etag()));
  ExpectVerified(*r);
  ExpectNoTokenReachedTheCdn();
}

TEST_F(HubTest, ASecondPullFetchesNothing) {
  ASSERT_TRUE(Pull("org/tiny").ok());
  hub_->Reset();
  auto r = Pull("org/tiny");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->stats.bytes_fetched, 0u);
  EXPECT_EQ(r->stats.bytes_reused, r->bytes_total);
  EXPECT_EQ(hub_->CdnBytes(), 0u);
}

TEST_F(HubTest, ABigFileComesInParallelRangesAndIsVerified) {
  auto r = Pull("org/big");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->bytes_total, kBigSize);
  EXPECT_EQ(r->stats.bytes_fetched, kBigSize);
  int ranged = 0;
  for (const auto& e : hub_->Log())
    if (e["port"] == "cdn" && e["range"].is_string()) ++ranged;
  EXPECT_EQ(ranged, 25) << "24 MiB + 12345 B in 1 MiB chunks";
  ExpectVerified(*r);
  ExpectNoTokenReachedTheCdn();
}

struct FaultCase {
  const char* name;
  const char* fault;
};

class HubFaultTest : public HubTest, public ::testing::WithParamInterface<FaultCase> {};

TEST_P(HubFaultTest, EndsInACompleteVerifiedStore) {
  hub_->Fault(GetParam().fault);
  for (const char* repo : {"org/big", "org/tiny"}) {
    auto r = Pull(repo);
    ASSERT_TRUE(r.ok()) << repo << ": " << r.status().message();
    ExpectVerified(*r);
  }
  auto faults = nlohmann::json::parse(hub_->Control("GET", "/_fake/faults"));
  ASSERT_FALSE(faults.empty());
  EXPECT_GT(faults[0]["hits"].get<int>(), 0) << "the fault never fired: " << faults.dump();
  ExpectNoTokenReachedTheCdn();
}

INSTANTIATE_TEST_SUITE_P(
    Faults, HubFaultTest,
    ::testing::Values(
        FaultCase{"drop_after_bytes",
                  R"({"kind": "drop_after_bytes", "bytes": 300000, "count": 4, "port": "cdn"})"},
        FaultCase{"ignore_range", R"({"kind": "ignore_range", "count": 1, "port": "cdn"})"},
        FaultCase{"rate_limit_429", R"({"kind": "rate_limit_429", "count": 2, "retry_after": 1})"},
        FaultCase{"fail_5xx", R"({"kind": "fail_5xx", "status": 503, "count": 3})"},
        FaultCase{"slow", R"({"kind": "slow", "bytes_per_s": 8000000, "count": 4, "port": "cdn"})"},
        FaultCase{"wrong_bytes", R"({"kind": "wrong_bytes", "count": 1, "port": "cdn"})"},
        FaultCase{"expired_cdn_url", R"({"kind": "expired_cdn_url", "count": 2})"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

TEST_F(HubTest, BytesThatNeverVerifyFailClearlyAndPublishNothing) {
  hub_->Fault(R"({"kind": "wrong_bytes", "port": "cdn", "path": "*model.safetensors"})");
  auto r = Pull("org/big");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("failed verification twice"));
  EXPECT_THAT(r.status().message(), HasSubstr("expected sha256"));
  EXPECT_FALSE(fs::exists(store_ + "/models--org--big/refs/main"));
  // snapshots/<commit>/ is there from the start (the store scan ties the partial to it), empty.
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(store_ + "/models--org--big/snapshots", ec);
       it != fs::recursive_directory_iterator(); it.increment(ec))
    EXPECT_TRUE(it->is_directory()) << it->path() << " was published";
}

TEST_F(HubTest, ErrorsSayWhatHappenedAndWhatToDo) {
  opts_.token = "";
  auto gated = Pull("org/gated");
  ASSERT_FALSE(gated.ok());
  EXPECT_THAT(gated.status().message(), HasSubstr("gated; set HF_TOKEN"));
  opts_.token = "hf_wrong";
  auto bad_token = Pull("org/tiny");
  ASSERT_FALSE(bad_token.ok());
  EXPECT_THAT(bad_token.status().message(), HasSubstr("refused the token"));
  opts_.token = "hf_good";
  auto missing = Pull("org/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no such repo"));
  auto bad_rev = Pull("org/tiny", "no-such-branch");
  ASSERT_FALSE(bad_rev.ok());
  EXPECT_THAT(bad_rev.status().message(), HasSubstr("no such branch, tag or commit"));
  EXPECT_THAT(bad_rev.status().message(), Not(HasSubstr("hf_good"))) << "the token is never shown";
  auto good = Pull("org/gated");
  EXPECT_TRUE(good.ok()) << good.status().message();
}

// A commit names a folder in the store: one that is not 40 hex digits ("../../..", 40 long) is
// refused before anything is written.
TEST_F(HubTest, ACommitThatIsNotACommitIsRefusedBeforeAnythingIsWritten) {
  hub_->Fault(R"({"kind": "bad_commit", "count": 1, "port": "api"})");
  auto r = Pull("org/tiny");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("is not a commit (40 lowercase hex digits)"));
  EXPECT_FALSE(std::filesystem::exists(store_ + "/models--org--tiny/snapshots"));
  hub_->Fault(
      R"({"kind": "bad_commit", "port": "api", "sha": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"})");
  EXPECT_FALSE(Pull("org/tiny").ok()) << "upper-case hex is not how the Hub writes a commit";
}

TEST_F(HubTest, AServerThatIgnoresRangeGetsTheFileInOneStream) {
  hub_->Fault(R"({"kind": "ignore_range", "count": 1, "port": "cdn"})");
  auto r = Pull("org/big");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ExpectVerified(*r);
  int whole = 0;
  for (const auto& e : hub_->Log())
    if (e["port"] == "cdn" && e["method"] == "GET" && e["range"].is_null() && e["status"] == 200 &&
        e.value("bytes_sent", uint64_t{0}) == kBigSize)
      ++whole;
  EXPECT_EQ(whole, 1) << "after one 200 to a ranged GET, the file comes whole, once";
}

TEST_F(HubTest, ARedirectToAnotherProtocolIsRefusedNotRetried) {
  for (const char* location : {"file:///etc/passwd", "ftp://127.0.0.1:1/model.safetensors"}) {
    hub_->Reset();
    hub_->Fault(R"({"kind": "bad_location", "path": "*model.safetensors", "location": ")" +
                std::string(location) + "\"}");
    auto r = Pull("org/big");
    ASSERT_FALSE(r.ok()) << location;
    EXPECT_THAT(r.status().message(), HasSubstr(location));
    EXPECT_THAT(r.status().message(), Not(HasSubstr("gave up after"))) << "no retries";
    int heads = 0;
    for (const auto& e : hub_->Log())
      if (e["path"].get<std::string>().find("model.safetensors") != std::string::npos) ++heads;
    EXPECT_EQ(heads, 1) << location;
  }
}

TEST_F(HubTest, ARedirectLoopOnTheHubEndsAfterTenHops) {
  hub_->Fault(R"({"kind": "bad_location", "path": "*model.safetensors",
                  "location": "/org/big/resolve/main/model.safetensors"})");
  auto r = Pull("org/big");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("more than 10 redirects"));
}

TEST_F(HubTest, AKilledDownloadResumesFetchingLittleMore) {
  hub_->Fault(R"({"kind": "slow", "bytes_per_s": 3000000, "port": "cdn"})");
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("HF_ENDPOINT", hub_->api().c_str(), 1);
    ::setenv("HF_TOKEN", "hf_good", 1);
    ::execl(BERTH_BIN, BERTH_BIN, "pull", "hf://org/big", "--store", store_.c_str(),
            "--connections", "4", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Kill -9 once about half the bytes are on disk.
  std::string blobs = store_ + "/models--org--big/blobs";
  auto allocated = [&] {
    uint64_t n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(blobs, ec)) {
      struct stat st;
      if (e.path().extension() == ".incomplete" && ::stat(e.path().c_str(), &st) == 0)
        n += static_cast<uint64_t>(st.st_blocks) * 512;
    }
    return n;
  };
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (allocated() < kBigSize / 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  // The hub logs a request when its connection ends: ask once every request has ended.
  uint64_t first = hub_->CdnBytes(/*wait_s=*/60);
  EXPECT_GE(first, kBigSize / 3);
  EXPECT_LT(first, kBigSize) << "the first run must be cut short";
  hub_->Reset();
  auto r = Pull("org/big");
  ASSERT_TRUE(r.ok()) << r.status().message();
  uint64_t second = hub_->CdnBytes();
  double extra = static_cast<double>(first + second) / static_cast<double>(kBigSize) - 1.0;
  std::printf("kill -9 at %.0f%%: first run %llu B, rerun %llu B, %.2f%% extra\n",
              100.0 * static_cast<double>(first) / static_cast<double>(kBigSize),
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(second),
              100 * extra);
  EXPECT_LE(extra, 0.01) << "at most 1% of the repo fetched twice";
  EXPECT_GT(r->stats.bytes_resumed, 0u);
  ExpectVerified(*r);
}

TEST_F(HubTest, AFullDiskFailsCleanlyKeepsThePartialAndTheNextRunCompletes) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root (CI runs as root)";
  std::string mnt = dir_ + "/small";
  fs::create_directories(mnt);
  ASSERT_EQ(::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=12m"), 0) << std::strerror(errno);
  store_ = mnt + "/store";
  // Checked before a byte is fetched: 12 MiB cannot hold the model.
  auto refused = Pull("org/big");
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("not enough free space for org/big@"));
  EXPECT_THAT(refused.status().message(), HasSubstr("nothing was downloaded"));
  EXPECT_EQ(hub_->CdnBytes(), 0u);
  // Another writer fills the disk after the check (the check is told the disk is empty):
  // the write fails mid-download and the partial file stays.
  SpaceFs lying(uint64_t{1} << 40);
  auto r = Pull("org/big", "main", &lying);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("No space left on device"));
  EXPECT_THAT(r.status().message(), HasSubstr("the partial file is kept"));
  std::string repo = store_ + "/models--org--big";
  EXPECT_FALSE(fs::exists(repo + "/refs/main")) << "nothing published";
  bool partial = false;
  for (const auto& e : fs::directory_iterator(repo + "/blobs"))
    partial = partial || e.path().extension() == ".incomplete";
  EXPECT_TRUE(partial);
  // The store scan ties the partial's bytes (what the disk holds of it, not its sparse size) to
  // the commit being downloaded, so the planner counts them: the plan after freeing some room
  // is not blocked by bytes already on disk.
  std::string commit = hub_->Info()["repos"]["org/big"]["revisions"]["main"]["commit"];
  auto scan = ScanStore(store_);
  ASSERT_TRUE(scan.ok()) << scan.status().message();
  const ObservedRevision* rev = nullptr;
  for (const auto& repo_seen : scan->repos)
    for (const auto& rv : repo_seen.revisions)
      if (repo_seen.repo_id == "org/big" && rv.commit == commit) rev = &rv;
  ASSERT_NE(rev, nullptr) << "the partial belongs to " << commit;
  EXPECT_FALSE(rev->complete);
  EXPECT_GT(rev->bytes_present, 4ull << 20);
  EXPECT_LE(rev->bytes_present, 12ull << 20) << "a sparse partial counts what it holds";
  uint64_t before = hub_->CdnBytes();
  ASSERT_EQ(::mount("tmpfs", mnt.c_str(), "tmpfs", MS_REMOUNT, "size=64m"), 0);
  hub_->Reset();
  auto again = Pull("org/big");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_GT(again->stats.bytes_resumed, 0u);
  EXPECT_LT(hub_->CdnBytes(), kBigSize - before / 2) << "what was written is kept";
  ExpectVerified(*again);
  ::umount2(mnt.c_str(), MNT_DETACH);
}

TEST(RepoPaths, EscapesAreRefused) {
  for (const char* bad : {"../x", "a/../../x", "/etc/passwd", "a//b", "a\\b", "./a", ""})
    EXPECT_FALSE(CheckRepoPath(bad).ok()) << bad;
  for (const char* ok : {"config.json", "sub/dir/tokenizer.json", "a..b/c", ".gitattributes"})
    EXPECT_TRUE(CheckRepoPath(ok).ok()) << ok;
}

}  // namespace
}  // namespace berth::testing

namespace berth::testing {
namespace {

TEST_F(HubTest, VerifyOfAManifestsModelsFindsACorruptBlob) {
  auto r = Pull("org/tiny");
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::string manifest = dir_ + "/verify-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(manifest) << "berth: 1\nhost: {store: " << store_
                          << "}\nmodels:\n  tiny: {source: hf://org/tiny}\n";
  std::ostringstream out, err;
  EXPECT_EQ(RunVerifyManifest(manifest, "", "", out, err), kExitOk) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr("model/tiny: "));
  EXPECT_THAT(out.str(), HasSubstr("6 files verified, 0 corrupt, 0 missing, 0 extra"));
  // One flipped byte in a blob, and a stray file in the snapshot.
  std::string blob = store_ + "/models--org--tiny/blobs/" + r->files[0].etag();
  std::string bytes = ReadAll(blob);
  bytes[0] = static_cast<char>(bytes[0] ^ 1);
  std::ofstream(blob, std::ios::binary | std::ios::trunc) << bytes;
  std::ofstream(store_ + "/models--org--tiny/snapshots/" + r->snapshot.commit + "/stray.txt")
      << "x";
  out.str("");
  EXPECT_EQ(RunVerifyManifest(manifest, "tiny", "", out, err), kExitError);
  EXPECT_THAT(out.str(), HasSubstr("corrupt  " + r->files[0].path));
  EXPECT_THAT(out.str(), HasSubstr("extra    stray.txt"));
  EXPECT_THAT(out.str(), HasSubstr("run berth pull"));
  // The advice acts on the manifest's store: without --store, a pull fills the default store
  // and leaves this one corrupt.
  EXPECT_THAT(out.str(), HasSubstr("run berth pull hf://org/tiny@main --store " + store_ +
                                   " to fetch what is missing or corrupt"));
  EXPECT_EQ(RunVerifyManifest(manifest, "nope", "", out, err), kExitError);
  EXPECT_THAT(err.str(), HasSubstr("no model 'nope'"));
}

// A blob of the right size with other bytes (a flipped bit on disk): pull re-hashes what is
// there, fetches that blob again, and only then says verified; verify agrees.
TEST_F(HubTest, ASameSizeCorruptBlobIsFetchedAgainByPullAndThenVerifies) {
  auto r = Pull("org/big");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const HubFileEntry* weights = nullptr;
  for (const auto& f : r->files)
    if (f.size == kBigSize) weights = &f;
  ASSERT_NE(weights, nullptr);
  std::string blob = store_ + "/models--org--big/blobs/" + weights->etag();
  {
    std::fstream f(blob, std::ios::binary | std::ios::in | std::ios::out);
    f.seekg(kBigSize / 2);
    char c = 0;
    f.get(c);
    f.seekp(kBigSize / 2);
    f.put(static_cast<char>(c ^ 0x20));
  }
  ASSERT_EQ(fs::file_size(blob), kBigSize);
  std::string manifest = dir_ + "/corrupt-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(manifest) << "berth: 1\nhost: {store: " << store_
                          << "}\nmodels:\n  big: {source: hf://org/big, include: ['*']}\n";
  std::ostringstream out, err;
  EXPECT_EQ(RunVerifyManifest(manifest, "", "", out, err), kExitError);
  EXPECT_THAT(out.str(), HasSubstr("corrupt  " + weights->path));
  EXPECT_THAT(out.str(), HasSubstr("run berth pull hf://org/big@main --store " + store_ +
                                   " --include '*' to fetch"));

  hub_->Reset();
  auto again = Pull("org/big");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->stats.blobs_replaced, 1);
  EXPECT_EQ(again->stats.bytes_fetched, kBigSize) << "the corrupt blob, and only it";
  EXPECT_EQ(again->stats.bytes_reused, again->bytes_total - kBigSize);
  EXPECT_EQ(hub_->CdnBytes(), kBigSize);
  ExpectVerified(*again);
  out.str("");
  EXPECT_EQ(RunVerifyManifest(manifest, "", "", out, err), kExitOk) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr("0 corrupt, 0 missing"));
}

// berth's record of a snapshot linked to /dev/zero: verify names the link and checks against
// the Hub instead, at once (the binary, with a deadline: an unbounded read would never end).
TEST_F(HubTest, AStoreRecordLinkedToDevZeroIsRefusedByVerifyWhichAsksTheHubInstead) {
  std::string commit = hub_->Info()["repos"]["org/tiny"]["revisions"]["main"]["commit"];
  std::string repo = store_ + "/models--org--tiny";
  fs::create_directories(repo + "/.berth");
  fs::create_directories(repo + "/snapshots/" + commit);
  fs::create_symlink("/dev/zero", repo + "/.berth/" + commit + ".json");
  CommandResult r = RunCommand(
      {BERTH_BIN, "verify", "hf://org/tiny@" + commit, "--store", store_},
      {"PATH=/usr/bin:/bin", "HF_ENDPOINT=" + hub_->api(), "HF_TOKEN=hf_good", "HOME=" + dir_},
      std::chrono::seconds(60));
  EXPECT_EQ(r.error, "") << "berth verify did not return: " << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr(repo + "/.berth/" + commit + ".json is a symbolic link to '/dev/zero'"));
  EXPECT_THAT(r.output, HasSubstr("verifying against the Hub instead"));
  EXPECT_THAT(r.output, HasSubstr("missing  config.json"));
}

TEST_F(HubTest, APlannedCommitIsFetchedWhereverTheBranchPointsAndTheRefNamesIt) {
  // The plan (or berth.lock) said v1.0's commit; main points elsewhere on the Hub.
  PullRequest req;
  req.store = store_;
  req.repo_id = "org/tiny";
  req.revision = "main";
  req.expect_commit = std::string(39, 'b') + "2";
  auto r = PullModel(req, opts_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->snapshot.commit, req.expect_commit);
  EXPECT_EQ(ReadAll(store_ + "/models--org--tiny/refs/main"), req.expect_commit);
  EXPECT_TRUE(
      fs::exists(store_ + "/models--org--tiny/snapshots/" + req.expect_commit + "/config.json"));
}

TEST_F(HubTest, VerifyOfAPinnedModelChecksTheCommitBerthLockPins) {
  auto r = Pull("org/tiny");
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::string dir = dir_ + "/pinned-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/berth.yaml")
      << "berth: 1\nhost: {store: " << store_ << "}\nmodels:\n  tiny: {source: hf://org/tiny}\n";
  auto lock = [&](const std::string& commit) {
    std::ofstream(dir + "/berth.lock")
        << R"({"format_version": 1, "models": {"tiny": {"repo": "org/tiny", "revision": "main", )"
        << R"("commit": ")" << commit << R"(", "locked_at": "2026-12-01T06:00:00Z"}}})";
  };
  std::ostringstream out, err;
  lock(r->snapshot.commit);
  EXPECT_EQ(RunVerifyManifest(dir, "", "", out, err), kExitOk) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr("org/tiny@" + r->snapshot.commit.substr(0, 7) + ": 6 files"));
  // Pinned at tag v1.0's commit (in the store too, but not where main points): that is what is
  // checked, from berth's record of it, without asking the Hub.
  auto v1 = Pull("org/tiny", "v1.0");
  ASSERT_TRUE(v1.ok()) << v1.status().message();
  ASSERT_NE(v1->snapshot.commit, r->snapshot.commit);
  lock(v1->snapshot.commit);
  out.str("");
  EXPECT_EQ(RunVerifyManifest(dir, "", "", out, err), kExitOk) << out.str() << err.str();
  EXPECT_THAT(out.str(), HasSubstr("org/tiny@" + v1->snapshot.commit.substr(0, 7) + ": 1 files"));
}

}  // namespace
}  // namespace berth::testing
