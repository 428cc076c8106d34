// LoadManifests on real files: a folder of files merges in name order, names defined in two
// files are errors naming both places, and the shipped examples load cleanly.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/hash.h"
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

// A fresh folder under the system temp dir, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            ("berth-manifests-" + std::string(info->name()) + "-" + std::to_string(getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name, std::ios::binary) << text;
    return (path_ / name).string();
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
};

TEST(Folder, FilesMergeInNameOrderAndOnlyYamlFilesCount) {
  TempDir dir;
  const std::string models = "berth: 1\nmodels:\n  m: {source: hf://a/b}\n";
  const std::string services =
      "berth: 1\nservices:\n  s: {model: m, engine: llama-server, port: 8080, llama_server: "
      "{model_file: m.gguf}}\n";
  const std::string b = dir.Write("20-services.yml", services);
  const std::string a = dir.Write("10-models.yaml", models);
  dir.Write("README.md", "not a manifest: [");
  dir.Write(".#10-models.yaml", "editor lock file: [");
  dir.Write("notes.yaml.bak", "berth: 2\n");
  fs::create_directory(fs::path(dir.path()) / "sub.yaml");

  LoadResult r = LoadManifests(dir.path());
  ASSERT_THAT(ToStrings(r), IsEmpty());
  EXPECT_THAT(r.desired.files, ElementsAre(a, b));
  EXPECT_EQ(r.desired.services.at("s").model, "m");
  EXPECT_EQ(r.desired.models.at("m").loc.ToString(), a + ":3:3");
  EXPECT_EQ(r.desired.digest, Sha256Hex(a + '\0' + models + '\0' + b + '\0' + services + '\0'));
}

TEST(Folder, NamesDefinedInTwoFilesNameBothPlaces) {
  TempDir dir;
  const std::string a = dir.Write("a.yaml", R"(berth: 1
host: {store: /a}
models:
  m: {source: hf://a/b}
services:
  s: {state: stopped}
)");
  const std::string b = dir.Write("b.yaml", R"(berth: 1
host: {store: /b}
services:
  s: {state: running}
models:
  m: {source: hf://a/c}
)");
  LoadResult r = LoadManifests(dir.path());
  EXPECT_THAT(
      ToStrings(r),
      ElementsAre(b + ":2:1: host is defined twice, first at " + a + ":2:1 (keep host in one file)",
                  b + ":4:3: service 's' is defined twice, first at " + a + ":6:3",
                  b + ":6:3: model 'm' is defined twice, first at " + a + ":4:3"));
  // The first definition wins, so later checks see one consistent manifest.
  EXPECT_EQ(r.desired.models.at("m").repo_id, "a/b");
  EXPECT_EQ(r.desired.services.at("s").state, ServiceState::kStopped);
}

TEST(Folder, ModelReferencesAndPortsAreCheckedAcrossFiles) {
  TempDir dir;
  const std::string a = dir.Write("a.yaml", R"(berth: 1
models: {minimax-m25: {source: hf://MiniMaxAI/MiniMax-M2.5}}
services:
  one: {model: minimax-m25, engine: llama-server, port: 8000, llama_server: {model_file: a.gguf}}
)");
  const std::string b = dir.Write("b.yaml", R"(berth: 1
services:
  two: {model: minimax-m52, engine: llama-server, port: 8000, llama_server: {model_file: a.gguf}}
)");
  EXPECT_THAT(ToStrings(LoadManifests(dir.path())),
              ElementsAre(b + ":3:16: model 'minimax-m52' is not defined in models (did you mean "
                              "'minimax-m25'?)",
                          b + ":3:57: port 8000 is already used by running service 'one' at " + a +
                              ":4:57 (give one of them another port, or set state: stopped "
                              "on one)"));
}

TEST(Folder, ABrokenFileDoesNotHideProblemsInOthers) {
  TempDir dir;
  const std::string a = dir.Write("a.yaml", "berth: 1\nmodels: [\n");
  const std::string b = dir.Write("b.yaml", "berth: 1\nservices: {s: {state: stoped}}\n");
  EXPECT_THAT(ToStrings(LoadManifests(dir.path())),
              ElementsAre(a + ":3:1: YAML syntax error: end of sequence flow not found",
                          b + ":2:23: bad state 'stoped' (did you mean 'stopped'?)"));
}

TEST(Folder, ASingleFileLoadsWhateverItsName) {
  TempDir dir;
  const std::string f = dir.Write("manifest.txt", berth::testing::kBase);
  LoadResult r = LoadManifests(f);
  EXPECT_THAT(ToStrings(r), IsEmpty());
  EXPECT_THAT(r.desired.files, ElementsAre(f));
}

TEST(Folder, AnEmptyFolderOrAMissingPathIsOneClearProblem) {
  TempDir dir;
  EXPECT_THAT(ToStrings(LoadManifests(dir.path())),
              ElementsAre(dir.path() + ": no manifest files in folder (berth reads the *.yaml "
                                       "and *.yml files in it)"));
  const std::string missing = dir.path() + "/nope";
  EXPECT_THAT(ToStrings(LoadManifests(missing)),
              ElementsAre(missing + ": no such file or folder (pass a manifest file or a "
                                    "folder)"));
}

TEST(Folder, ADanglingSymlinkIsAnErrorNamingTheLink) {
  TempDir dir;
  dir.Write("a.yaml", kBase);
  const std::string link = dir.path() + "/b.yaml";
  fs::create_symlink(dir.path() + "/gone.yaml", link);
  EXPECT_THAT(ToStrings(LoadManifests(dir.path())),
              ElementsAre(link + ": symbolic link to '" + dir.path() +
                          "/gone.yaml', which does not exist (fix or remove the link)"));
}

TEST(Folder, ASymlinkToAManifestIsRead) {
  TempDir dir;
  const std::string target = dir.Write("real.txt", kBase);
  fs::create_symlink(target, dir.path() + "/a.yaml");
  LoadResult r = LoadManifests(dir.path());
  EXPECT_THAT(ToStrings(r), IsEmpty());
  EXPECT_EQ(r.desired.services.size(), 1u);
}

// A FIFO would block a plain open() until a writer came: berth must refuse it at once. The load
// runs on another thread so that a regression fails the test instead of hanging it.
TEST(Folder, AFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  dir.Write("a.yaml", kBase);
  const std::string fifo = dir.path() + "/b.yaml";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {dir.path(), fifo}) {
    auto loaded = std::async(std::launch::async, [&] { return LoadManifests(path); });
    if (loaded.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      // Unblock the reader so the test can end, then fail.
      int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) close(fd);
      FAIL() << "loading " << path << " blocked on a FIFO";
    }
    EXPECT_THAT(ToStrings(loaded.get()), ElementsAre(HasSubstr(fifo + ": not a regular file")));
  }
}

// A 100 MB manifest took 985 MB of memory to parse: a file over 4 MiB is refused before it is
// read, naming the file. The file is sparse, so the test writes nothing to disk.
TEST(Folder, AFileOverFourMiBIsRefusedBeforeItIsRead) {
  TempDir dir;
  dir.Write("a.yaml", kBase);
  const std::string big = dir.Write("b.yaml", "berth: 1\n");
  fs::resize_file(big, 100u << 20);
  for (const std::string& path : {dir.path(), big}) {
    EXPECT_THAT(ToStrings(LoadManifests(path)),
                ElementsAre(big + ": larger than berth reads (104857600 bytes; at most 4194304 "
                                  "bytes, 4 MiB): a manifest or berth.lock is a few KiB, check "
                                  "that this is the file meant"));
  }
  // The limit is on bytes, not on what they hold: one byte over it is refused, the limit itself
  // is read (a comment, then the manifest).
  const std::string over = dir.Write("c.yaml", std::string(kMaxManifestFileBytes + 1, '#'));
  EXPECT_THAT(ToStrings(LoadManifests(over)),
              ElementsAre(HasSubstr(over + ": larger than berth reads (4194305 bytes")));
  std::string at = kBase;
  at += "#" + std::string(kMaxManifestFileBytes - at.size() - 2, 'x') + "\n";
  ASSERT_EQ(at.size(), kMaxManifestFileBytes);
  EXPECT_THAT(ToStrings(LoadManifests(dir.Write("d.yaml", at))), IsEmpty());
}

TEST(Folder, AnInMemoryFileOverFourMiBIsRefusedToo) {
  EXPECT_THAT(
      ToStrings(LoadManifestTexts({{"big.yaml", std::string(kMaxManifestFileBytes + 1, '#')}})),
      ElementsAre(HasSubstr("big.yaml: larger than berth reads (4194305 bytes")));
}

// A file name is text berth did not write: its controls reach the terminal as \xNN.
TEST(Folder, AFileNameWithTerminalControlsIsShownEscaped) {
  TempDir dir;
  dir.Write("a\x1b[2J\r\x9b.yaml", "berth: 1\nservices: {s: {prot: 1}}\n");
  std::vector<std::string> problems = ToStrings(LoadManifests(dir.path()));
  ASSERT_FALSE(problems.empty());
  for (const std::string& p : problems) {
    EXPECT_THAT(p, HasSubstr("/a\\x1b[2J\\x0d\\x9b.yaml:"));
    EXPECT_EQ(p.find_first_of("\x1b\r\n"), std::string::npos) << p;
  }
}

// manifests/examples/<name>/ are manifests operators copy from: each folder must load cleanly.
TEST(Examples, EveryShippedExampleLoadsWithoutProblems) {
  const fs::path examples = fs::path(BERTH_SOURCE_DIR) / "manifests" / "examples";
  int found = 0;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(examples, ec)) {
    if (!entry.is_directory() || !fs::exists(entry.path() / "berth.yaml")) continue;
    ++found;
    LoadResult r = LoadManifests(entry.path().string());
    EXPECT_THAT(ToStrings(r), IsEmpty()) << entry.path();
    EXPECT_FALSE(r.desired.services.empty()) << entry.path();
  }
  EXPECT_GT(found, 0) << "no manifests/examples/*/berth.yaml found under " << examples;
}

}  // namespace
}  // namespace berth
