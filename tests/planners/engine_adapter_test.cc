// The engine adapters: each engine's command line, and the flags `args` may not name.
#include "planners/engines/adapter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::IsSupersetOf;

ServiceSpec Sglang() {
  ServiceSpec s;
  s.name = "sg";
  s.has_engine = true;
  s.engine = EngineKind::kSglang;
  s.model = "m";
  s.gpus = {0};
  s.port = 30000;
  return s;
}

RenderContext Ctx(std::string executable) {
  RenderContext c;
  c.snapshot_path = "/models/models--o--m/snapshots/abc";
  c.executable = std::move(executable);
  return c;
}

// The words before --model-path: what launches SGLang.
std::vector<std::string> Launcher(const std::vector<std::string>& argv) {
  auto at = std::find(argv.begin(), argv.end(), "--model-path");
  return {argv.begin(), at};
}

TEST(SglangAdapter, EveryPythonInterpreterGetsTheLaunchModule) {
  for (std::string exe : {"python3", "/opt/sglang/bin/python", "/opt/sglang/bin/python3",
                          "/usr/bin/python3.12", "python"})
    EXPECT_THAT(Launcher(ServiceArgv(Sglang(), Ctx(exe))),
                ElementsAre(exe, "-m", "sglang.launch_server"))
        << exe;
}

TEST(SglangAdapter, TheSglangConsoleScriptGetsItsServeSubcommand) {
  EXPECT_THAT(Launcher(ServiceArgv(Sglang(), Ctx("/opt/sglang/bin/sglang"))),
              ElementsAre("/opt/sglang/bin/sglang", "serve"));
  // A wrapper of the operator's own is run as it is.
  EXPECT_THAT(Launcher(ServiceArgv(Sglang(), Ctx("/usr/local/bin/run-sglang"))),
              ElementsAre("/usr/local/bin/run-sglang"));
  EXPECT_THAT(Launcher(ServiceArgv(Sglang(), Ctx("/opt/pythonista/bin/serve"))),
              ElementsAre("/opt/pythonista/bin/serve"));
}

TEST(EngineAdapter, ArgsNamingAFlagBerthRendersAreFoundInEverySpelling) {
  ServiceSpec s = Sglang();
  s.engine = EngineKind::kVllm;
  auto at = [&](std::vector<std::string> args) { return FindOwnedFlag(s, args); };
  ASSERT_TRUE(at({"--port", "9000"}));
  EXPECT_EQ(at({"--port", "9000"})->set_by, "port");
  EXPECT_EQ(at({"--enforce-eager", "--port=9000"})->index, 1u);
  EXPECT_EQ(at({"-tp", "4"})->set_by, "vllm.tensor_parallel_size");
  EXPECT_EQ(at({"--served-model-name", "x"})->set_by, "vllm.served_model_name");
  EXPECT_FALSE(at({"--enforce-eager", "--max-num-seqs", "64"}));
  // A value that looks like a flag of another engine is not one of this engine's.
  EXPECT_FALSE(at({"--model-path", "x"}));
  // Flags berth renders only when their key is set are free otherwise.
  EXPECT_FALSE(at({"--max-model-len", "8192"}));
  s.vllm.max_model_len = 4096;
  EXPECT_TRUE(at({"--max-model-len", "8192"}));
}

TEST(EngineAdapter, EveryEngineOwnsItsPortHostAndServedName) {
  for (EngineKind e : {EngineKind::kVllm, EngineKind::kSglang, EngineKind::kLlamaServer}) {
    ServiceSpec s = Sglang();
    s.engine = e;
    std::vector<std::string> keys;
    for (const OwnedFlag& f : AdapterFor(e).OwnedFlags(s)) keys.push_back(f.set_by);
    EXPECT_THAT(keys, IsSupersetOf({"port", "bind", "model"})) << EngineName(e);
  }
  ServiceSpec c = Sglang();
  c.engine = EngineKind::kCommand;
  EXPECT_TRUE(AdapterFor(EngineKind::kCommand).OwnedFlags(c).empty());
}

}  // namespace
}  // namespace berth
