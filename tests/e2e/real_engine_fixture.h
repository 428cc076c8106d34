// The real-engine suites (issue 38): llama.cpp's llama-server, built from source by
// .ci/setup --tests (.ci/llama-server), serving tiny random-weight GGUFs that
// tests/real_engine/make_gguf.py writes with llama.cpp's own gguf-py, as units berth writes and
// starts on the sandboxed systemd. Each test makes its own models and starts its own servers on
// loopback; every wait is bounded (a hung server fails the test, it does not stall CI).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/hf_cache.h"
#include "providers/host/command_runner.h"
#include "tests/e2e/e2e_fixture.h"

namespace berth::testing {

inline constexpr const char* kGgufCommit = "1111111111111111111111111111111111111111";

class RealEngineSuite : public SandboxSuite {
 protected:
  void SetUp() override {
    SandboxSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(std::filesystem::exists(LLAMA_SERVER_BIN))
        << LLAMA_SERVER_BIN << " is missing: .ci/setup --tests builds it (.ci/llama-server)";
    store_ = (tmp_ / "store").string();
  }

  /// models--org--NAME/snapshots/<kGgufCommit>/model.gguf in the store, written by
  /// make_gguf.py with `flags`; refs/main names the commit.
  void MakeGguf(const std::string& name, const std::vector<std::string>& flags = {}) {
    HfCachePaths paths(store_, "org/" + name);
    std::string snap = paths.SnapshotDir(kGgufCommit);
    std::filesystem::create_directories(snap);
    std::vector<std::string> argv = {"/usr/bin/python3",
                                     SourceDir() + "/tests/real_engine/make_gguf.py",
                                     "--llama-src",
                                     LLAMA_SRC,
                                     "--out",
                                     snap + "/model.gguf"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    CommandResult r = RunCommand(argv);
    ASSERT_TRUE(r.ok()) << r.output << r.error;
    std::filesystem::create_directories(paths.RefsDir());
    std::ofstream(paths.RefPath("main")) << kGgufCommit;
  }

  /// GET http://127.0.0.1:PORT/PATH's body ("" when nothing answered within 10 s).
  static std::string Get(int port, const std::string& path) {
    CommandResult r =
        RunCommand({"/usr/bin/python3", "-c",
                    "import sys, urllib.request\n"
                    "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())",
                    "http://127.0.0.1:" + std::to_string(port) + path});
    return r.ok() ? r.output : "";
  }

  /// Writes `text` as a manifest file of this test; its path.
  std::string WriteManifest(const std::string& text) {
    std::string path = (tmp_ / ("berth-" + std::to_string(++manifests_) + ".yaml")).string();
    std::ofstream(path) << text;
    return path;
  }
  /// The host: section every real-engine manifest starts with.
  std::string HostSection(const std::string& more = "") const {
    return "berth: 1\nhost:\n  store: " + store_ + "\n  unit_dir: " + sandbox_->units_dir() +
           "\n  executables: {llama-server: " + LLAMA_SERVER_BIN + "}\n" + more;
  }

  std::string store_;
  int manifests_ = 0;
};

}  // namespace berth::testing
