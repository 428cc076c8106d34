// berth.lock: its JSON form (stable, strict), and the loader reading it beside the manifests as
// part of the desired state: entries, digest, a malformed lock as a problem of that file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/lock_file.h"
#include "manifests/loader.h"
#include "tests/manifests/test_util.h"

namespace berth {
namespace {

namespace fs = std::filesystem;
using ::berth::testing::kBase;
using ::berth::testing::ToStrings;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kC1(40, '1');
const std::string kC2(40, '2');

std::string LockJson(const std::string& entry) {
  return R"({"format_version": 1, "models": {"minimax-m25": )" + entry + "}}";
}
std::string Entry(const std::string& revision = "main", const std::string& commit = kC1) {
  return R"({"repo": "MiniMaxAI/MiniMax-M2.5", "revision": ")" + revision + R"(", "commit": ")" +
         commit + R"(", "locked_at": "2026-12-01T06:00:00Z"})";
}

TEST(LockFile, RoundTripsWithSortedKeysAndAFinalNewline) {
  std::map<std::string, LockEntry> entries = {
      {"b", {"org/b", "v1", kC2, "2026-12-01T06:00:00Z"}},
      {"a", {"org/a", "main", kC1, "2026-12-01T05:00:00Z"}}};
  std::string text = SerializeLockFile(entries);
  EXPECT_EQ(text,
            "{\n  \"format_version\": 1,\n  \"models\": {\n    \"a\": {\n      \"commit\": \"" +
                kC1 +
                "\",\n      \"locked_at\": \"2026-12-01T05:00:00Z\",\n      \"repo\": "
                "\"org/a\",\n      \"revision\": \"main\"\n    },\n    \"b\": {\n      "
                "\"commit\": \"" +
                kC2 +
                "\",\n      \"locked_at\": \"2026-12-01T06:00:00Z\",\n      \"repo\": "
                "\"org/b\",\n      \"revision\": \"v1\"\n    }\n  }\n}\n");
  auto back = ParseLockFile(text);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->at("a").commit, kC1);
  EXPECT_EQ(back->at("b").revision, "v1");
  EXPECT_EQ(SerializeLockFile(*back), text);
}

TEST(LockFile, MalformedLocksSayWhatIsWrongAndWhere) {
  auto problem = [](const std::string& text) {
    auto r = ParseLockFile(text);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(problem("{\"format_version\": 1, \"models\": {"), "not valid JSON");
  EXPECT_EQ(problem("[]"), "must be a JSON object");
  EXPECT_EQ(problem(R"({"models": {}})"), "format_version must be 1");
  EXPECT_EQ(problem(R"({"format_version": 2, "models": {}})"), "format_version must be 1");
  EXPECT_THAT(problem(R"({"format_version": 1, "modles": {}})"), HasSubstr("unknown key 'modles'"));
  EXPECT_EQ(problem(LockJson(Entry("main", "abc"))),
            "models.minimax-m25.commit: 'abc' is not a 40-hex commit");
  EXPECT_EQ(problem(LockJson(R"({"repo": "MiniMaxAI/MiniMax-M2.5", "revision": "main"})")),
            "models.minimax-m25: missing 'commit'");
  EXPECT_THAT(problem(LockJson(R"({"repo": "x", "revision": "main", "commit": ")" + kC1 +
                               R"(", "locked_at": "t", "extra": 1})")),
              HasSubstr("models.minimax-m25: unknown key 'extra'"));
  EXPECT_EQ(problem(LockJson(R"({"repo": "nope", "revision": "main", "commit": ")" + kC1 +
                             R"(", "locked_at": "t"})")),
            "models.minimax-m25.repo: 'nope' is not an org/name repo id");
  EXPECT_EQ(problem(LockJson(Entry())), "ok");
}

TEST(LockFile, SitsInTheFolderOrBesideASingleManifestFile) {
  fs::path dir = fs::temp_directory_path() / ("berth-lockpath-" + std::to_string(getpid()));
  fs::create_directories(dir);
  EXPECT_EQ(LockFilePath(dir.string()), (dir / "berth.lock").string());
  EXPECT_EQ(LockFilePath((dir / "host.yaml").string()), (dir / "berth.lock").string());
  EXPECT_EQ(LockFilePath("berth.yaml"), "berth.lock");
  fs::remove_all(dir);
}

TEST(LockFile, InMemoryLockBecomesTheDesiredPinsAndPartOfTheDigest) {
  LoadResult plain = LoadManifestTexts({{"berth.yaml", kBase}});
  LoadResult locked =
      LoadManifestTexts({{"berth.yaml", kBase}}, std::make_pair("berth.lock", LockJson(Entry())));
  ASSERT_THAT(ToStrings(locked), IsEmpty());
  const ModelSpec& m = locked.desired.models.at("minimax-m25");
  ASSERT_NE(locked.desired.PinFor(m), nullptr);
  EXPECT_EQ(locked.desired.PinFor(m)->commit, kC1);
  EXPECT_NE(plain.desired.digest, locked.desired.digest);
  LoadResult moved = LoadManifestTexts({{"berth.yaml", kBase}},
                                       std::make_pair("berth.lock", LockJson(Entry("main", kC2))));
  EXPECT_NE(moved.desired.digest, locked.desired.digest);
}

TEST(LockFile, AStaleEntryIsLoadedButPinsNothing) {
  // Locked when the manifest asked for v1; it asks for main now.
  LoadResult r = LoadManifestTexts({{"berth.yaml", kBase}},
                                   std::make_pair("berth.lock", LockJson(Entry("v1"))));
  ASSERT_THAT(ToStrings(r), IsEmpty());
  EXPECT_EQ(r.desired.locks.at("minimax-m25").revision, "v1");
  EXPECT_EQ(r.desired.PinFor(r.desired.models.at("minimax-m25")), nullptr);
}

TEST(LockFile, AMalformedLockBesideTheManifestsIsAProblemNamingIt) {
  fs::path dir = fs::temp_directory_path() / ("berth-lockload-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "berth.yaml") << kBase;
  std::ofstream(dir / "berth.lock") << LockJson(Entry("main", "not-a-commit"));
  LoadResult r = LoadManifests(dir.string());
  EXPECT_THAT(ToStrings(r),
              ElementsAre((dir / "berth.lock").string() +
                          ": models.minimax-m25.commit: 'not-a-commit' is not a 40-hex commit "
                          "(fix it by hand, or remove it and run berth lock to write it again)"));
  // Fixed, it loads, from the folder or from the single file beside it.
  std::ofstream(dir / "berth.lock") << LockJson(Entry());
  for (const std::string& path : {dir.string(), (dir / "berth.yaml").string()}) {
    LoadResult ok = LoadManifests(path);
    ASSERT_THAT(ToStrings(ok), IsEmpty());
    EXPECT_EQ(ok.desired.lock_path, (dir / "berth.lock").string());
    EXPECT_EQ(ok.desired.locks.at("minimax-m25").commit, kC1);
  }
  fs::remove_all(dir);
}

// berth.lock is a file berth writes (berth lock): a link there is refused, not followed (it could
// point at /dev/zero or at another host's lock), and so is a file of gigabytes.
TEST(LockFile, ALinkOrAHugeFileAtTheLockIsAProblemNamingIt) {
  fs::path dir = fs::temp_directory_path() / ("berth-lockhostile-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "berth.yaml") << kBase;
  fs::create_symlink("/dev/zero", dir / "berth.lock");
  EXPECT_THAT(ToStrings(LoadManifests(dir.string())),
              ElementsAre(HasSubstr((dir / "berth.lock").string() + ": a symbolic link; berth "
                                                                    "writes this file itself")));
  fs::remove(dir / "berth.lock");
  std::ofstream(dir / "berth.lock");
  fs::resize_file(dir / "berth.lock", uintmax_t{4} << 30);  // sparse
  EXPECT_THAT(ToStrings(LoadManifests(dir.string())),
              ElementsAre(HasSubstr((dir / "berth.lock").string() + ": larger than berth reads")));
  fs::remove_all(dir);
}

TEST(LockFile, KeepRevisionsIsReadFromHostAndDefaultsToOne) {
  EXPECT_EQ(testing::Load(kBase).desired.host.keep_revisions, 1);
  LoadResult r = testing::Load(std::string(kBase) + "host: {keep_revisions: 3}\n");
  ASSERT_THAT(ToStrings(r), IsEmpty());
  EXPECT_EQ(r.desired.host.keep_revisions, 3);
  EXPECT_THAT(testing::Problems(std::string(kBase) + "host: {keep_revisions: -1}\n"),
              ElementsAre(HasSubstr("keep_revisions")));
}

// host.prewarm (docs/operating.md "Prewarm"): on unless the manifest says false; a value that
// is not a boolean is refused where it is written.
TEST(HostPrewarm, IsOnByDefaultAndTakesABoolean) {
  EXPECT_TRUE(testing::Load(kBase).desired.host.prewarm);
  LoadResult r = testing::Load(std::string(kBase) + "host: {prewarm: false}\n");
  ASSERT_THAT(ToStrings(r), IsEmpty());
  EXPECT_FALSE(r.desired.host.prewarm);
  EXPECT_THAT(testing::Problems(std::string(kBase) + "host: {prewarm: sometimes}\n"),
              ElementsAre(HasSubstr("prewarm")));
}

}  // namespace
}  // namespace berth
