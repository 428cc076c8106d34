// `berth plan` and `berth validate` as the CLI runs them: exit codes and messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "engine/cli/commands.h"
#include "engine/loop/manifest_probe.h"

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("berth-cli-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    seed_ = std::string(BERTH_SOURCE_DIR) + "/manifests/examples/blackwell-8x/";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  int Plan(const std::string& manifest, const std::string& observed, bool detailed,
           std::string format = "text") {
    PlanCommand cmd;
    cmd.manifest_path = manifest;
    cmd.observed_path = observed;
    cmd.format = format;
    cmd.detailed_exitcode = detailed;
    out_.str("");
    err_.str("");
    return RunPlan(cmd, out_, err_);
  }
  std::string SeedManifest() {
    std::ifstream in(seed_ + "berth.yaml");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  fs::path dir_;
  std::string seed_;
  std::ostringstream out_, err_;
};

TEST_F(CliTest, DetailedExitcodeIsTwoWhenThereAreChanges) {
  EXPECT_EQ(Plan(seed_ + "berth.yaml", seed_ + "observed.json", true), kExitChanges);
  EXPECT_EQ(Plan(seed_ + "berth.yaml", seed_ + "observed.json", false), kExitOk);
}

TEST_F(CliTest, DetailedExitcodeIsZeroWhenNothingIsToDo) {
  std::string m = SeedManifest();
  m.replace(m.find("blackwell-*"), 11, "other-*");
  EXPECT_EQ(Plan(Write("m.yaml", m), seed_ + "observed.json", true), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("Nothing to do on blackwell-01"));
}

TEST_F(CliTest, ABlockedPlanExitsThreeAndSaysWhatIsShort) {
  std::string m = SeedManifest();
  m.replace(m.find("reserve: 100GiB"), 15, "reserve: 1100GB");
  EXPECT_EQ(Plan(Write("m.yaml", m), seed_ + "observed.json", true), kExitBlocked);
  EXPECT_THAT(out_.str(), HasSubstr("BLOCKED"));
  EXPECT_THAT(out_.str(), HasSubstr("step 1, disk:"));
  EXPECT_THAT(out_.str(), HasSubstr("short by 130 GB"));
  EXPECT_EQ(Plan(Write("m.yaml", m), seed_ + "observed.json", true, "json"), kExitBlocked);
  EXPECT_THAT(out_.str(), HasSubstr("\"status\": \"blocked\""));
}

TEST_F(CliTest, AnInvalidManifestExitsOneWithItsDiagnostics) {
  std::string m = "berth: 1\nservices:\n  x:\n    engine: vllm\n    prot: 8000\n";
  EXPECT_EQ(Plan(Write("bad.yaml", m), seed_ + "observed.json", true), kExitError);
  EXPECT_THAT(err_.str(), HasSubstr("bad.yaml:5:5: unknown key 'prot'"));
  EXPECT_THAT(err_.str(), HasSubstr("nothing was planned or changed"));
  EXPECT_EQ(out_.str(), "");
  std::ostringstream out, err;
  EXPECT_EQ(RunValidate(dir_ / "bad.yaml", out, err), kExitError);
  EXPECT_EQ(RunValidate(seed_ + "berth.yaml", out, err), kExitOk);
  EXPECT_THAT(out.str(), HasSubstr("valid (2 models, 2 services)"));
}

TEST_F(CliTest, AMissingObservationSaysHowToMakeOne) {
  EXPECT_EQ(Plan(seed_ + "berth.yaml", (dir_ / "nope.json").string(), true), kExitError);
  EXPECT_THAT(err_.str(), HasSubstr("berth observe -o json"));
}

TEST_F(CliTest, AnUnknownSizeOfflineSaysTheDiskCheckCouldNotBeMade) {
  std::string m = SeedManifest();
  m.replace(m.find("    size: 230GB\n"), 16, "");
  std::ifstream in(seed_ + "observed.json");
  std::ostringstream obs;
  obs << in.rdbuf();
  std::string o = obs.str();
  // Drop the Hub's answer: offline, nobody asked it.
  size_t hub = o.find("\"hub\": [");
  size_t state = o.find("\"berth_state\"");
  o.replace(hub, state - hub, "\"hub\": [],\n  ");
  EXPECT_EQ(Plan(Write("m.yaml", m), Write("o.json", o), true), kExitChanges) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("disk check for model/minimax-m25 could not be made"));
  EXPECT_EQ(Plan(seed_ + "berth.yaml", Write("o.json", o), true), kExitChanges);
  EXPECT_THAT(out_.str(), HasSubstr("size from the manifest's size:"));
}

// An observation carries berth's records (a last failure, an apply that stopped half-way): the
// text and JSON plans made from it list the same actions and say the same about those records.
TEST_F(CliTest, TextAndJsonPlansFromOneObservationAgree) {
  std::ifstream in(seed_ + "observed.json");
  std::ostringstream obs;
  obs << in.rdbuf();
  std::string o = obs.str();
  size_t state = o.find("\"berth_state\": {") + std::string("\"berth_state\": {").size();
  o.insert(state,
           "\n    \"failures\": {\"service/vllm-minimax-m25\": {\"time\": "
           "\"2026-12-01T02:00:00Z\", \"message\": \"did not become healthy within 30m\"}},"
           "\n    \"interrupted\": \"an apply started 2026-12-01T01:00:00Z by pid 77 stopped at "
           "step 2 (write-unit unit/vllm-minimax-m25.service, running)\",");
  std::string path = Write("o.json", o);
  ASSERT_EQ(Plan(seed_ + "berth.yaml", path, true, "text"), kExitChanges) << err_.str();
  std::string text = out_.str();
  ASSERT_EQ(Plan(seed_ + "berth.yaml", path, true, "json"), kExitChanges) << err_.str();
  EXPECT_EQ(err_.str(), "");
  nlohmann::json doc = nlohmann::json::parse(out_.str());
  std::vector<std::string> from_json;
  for (const auto& c : doc["resource_changes"])
    from_json.push_back(c["action"].get<std::string>() + " " + c["address"].get<std::string>());
  std::vector<std::string> from_text;
  std::regex line(R"(^\s+\d+\s+\S\s+(\S+)\s+(\S+))");
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line)) from_text.push_back(m[1].str() + " " + m[2].str());
  }
  EXPECT_EQ(from_text, from_json);
  // The seed switch, its engine check, the prewarm of MiniMax's weights, enable and disable.
  EXPECT_EQ(from_json.size(), 10u);
  for (const std::string& said :
       {std::string("last apply failed on service/vllm-minimax-m25 at 2026-12-01T02:00:00Z"),
        std::string("by pid 77 stopped at step 2")}) {
    EXPECT_THAT(text, HasSubstr(said));
    EXPECT_THAT(doc["warnings"].dump(), HasSubstr(said));
  }
}

// berth plan --diff: the new unit's whole text under its step; without it, the one-line detail.
TEST_F(CliTest, PlanDiffShowsTheNewUnitFileUnderItsStep) {
  PlanCommand cmd;
  cmd.manifest_path = seed_ + "berth.yaml";
  cmd.observed_path = seed_ + "observed.json";
  cmd.diff = true;
  ASSERT_EQ(RunPlan(cmd, out_, err_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("new unit file in /etc/systemd/system\n"
                                    "       --- /dev/null\n"
                                    "       +++ b/vllm-minimax-m25.service\n"
                                    "       @@ -0,0 +1,24 @@\n"
                                    "       +# Managed by berth"));
  EXPECT_EQ(Plan(seed_ + "berth.yaml", seed_ + "observed.json", false), kExitOk);
  EXPECT_THAT(out_.str(), Not(HasSubstr("+++ b/vllm-minimax-m25.service")));
}

}  // namespace
}  // namespace berth

namespace berth {
namespace {

class LockCliTest : public CliTest {
 protected:
  int Lock(const std::string& manifest, bool update, std::vector<std::string> models = {}) {
    LockCommand cmd;
    cmd.manifest_path = manifest;
    cmd.update = update;
    cmd.models = std::move(models);
    out_.str("");
    err_.str("");
    return RunLock(cmd, out_, err_);
  }
};

TEST_F(LockCliTest, AnUnknownModelIsNamedWithTheKnownOnesAndNothingIsWritten) {
  std::string m = Write("berth.yaml", SeedManifest());
  EXPECT_EQ(Lock(m, true, {"minimax"}), kExitError);
  EXPECT_THAT(err_.str(), HasSubstr("berth lock: no model 'minimax' in " + m +
                                    " (its models: kimi-k25-nvfp4, minimax-m25); nothing was "
                                    "written"));
  EXPECT_FALSE(fs::exists(dir_ / "berth.lock"));
}

TEST_F(LockCliTest, OfflineItSaysWhichModelsItCouldNotResolveAndWritesNothing) {
  std::string m = Write("berth.yaml", SeedManifest());
  ::setenv("HF_HUB_OFFLINE", "1", 1);
  int rc = Lock(m, false);
  ::unsetenv("HF_HUB_OFFLINE");
  EXPECT_EQ(rc, kExitError);
  EXPECT_THAT(err_.str(), HasSubstr("HF_HUB_OFFLINE is set, so berth cannot ask the Hub which "
                                    "commit kimi-k25-nvfp4, minimax-m25 points at"));
  EXPECT_FALSE(fs::exists(dir_ / "berth.lock"));
}

TEST_F(LockCliTest, EntriesOfModelsGoneOrPinnedByCommitAreDroppedWithoutAskingTheHub) {
  const std::string c(40, 'c');
  std::string m =
      Write("berth.yaml", "berth: 1\nmodels:\n  a: {source: hf://org/a, revision: " + c + "}\n");
  Write("berth.lock", R"({"format_version": 1, "models": {
    "a": {"repo": "org/a", "revision": "main", "commit": ")" +
                          c + R"(", "locked_at": "t"},
    "gone": {"repo": "org/gone", "revision": "main", "commit": ")" +
                          c + R"(", "locked_at": "t"}}})");
  ::setenv("HF_HUB_OFFLINE", "1", 1);  // nothing to resolve: the Hub is not needed
  int rc = Lock(m, true);
  ::unsetenv("HF_HUB_OFFLINE");
  ASSERT_EQ(rc, kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("model/a: the manifest pins commit ccccccc itself; entry "
                                    "removed"));
  EXPECT_THAT(out_.str(), HasSubstr("model/gone: no model of the manifest has this name any "
                                    "more; entry removed"));
  std::ifstream in(dir_ / "berth.lock");
  std::ostringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "{\n  \"format_version\": 1,\n  \"models\": {}\n}\n");
}

TEST(ManifestProbe, ALockFileBesideTheManifestIsPartOfTheFingerprint) {
  fs::path dir = fs::temp_directory_path() / ("berth-probe-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "berth.yaml") << "berth: 1\n";
  std::string before_dir = ManifestFingerprint(dir.string());
  std::string before_file = ManifestFingerprint((dir / "berth.yaml").string());
  std::ofstream(dir / "berth.lock") << "{}";
  EXPECT_NE(ManifestFingerprint(dir.string()), before_dir);
  EXPECT_NE(ManifestFingerprint((dir / "berth.yaml").string()), before_file);
  fs::remove_all(dir);
}

// `berth render` without --observed reads this host's store, so the unit names the commit the
// store's ref points at, as apply would write it; unresolved, it says so instead of guessing.
TEST_F(CliTest, RenderWithoutAnObservationResolvesTheRevisionFromTheStore) {
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  fs::create_directories(dir_ / "store/models--org--m/refs");
  fs::create_directories(dir_ / "store/models--org--m/snapshots" / commit);
  Write("store/models--org--m/refs/main", commit);
  std::string manifest =
      Write("berth.yaml", "berth: 1\nhost: {store: " + (dir_ / "store").string() +
                              ", unit_dir: " + dir_.string() +
                              "}\nmodels:\n  m: {source: hf://org/m}\n"
                              "  other: {source: hf://org/other}\nservices:\n"
                              "  a: {model: m, engine: vllm, gpus: [0], port: 8000}\n"
                              "  b: {model: other, engine: vllm, gpus: [1], port: 8001}\n");
  ::setenv("HF_HUB_OFFLINE", "1", 1);
  EXPECT_EQ(RunRender(manifest, "", "", out_, err_), kExitOk) << err_.str();
  ::unsetenv("HF_HUB_OFFLINE");
  EXPECT_THAT(out_.str(), HasSubstr("models--org--m/snapshots/" + commit + "\""));
  EXPECT_THAT(err_.str(), HasSubstr("model/other: revision 'main' is not resolved to a commit"));
  EXPECT_THAT(err_.str(), ::testing::Not(HasSubstr("model/m:")));
}

}  // namespace
}  // namespace berth
