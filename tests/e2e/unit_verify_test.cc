// Every engine's rendered unit passes `systemd-analyze verify`, tricky arguments included.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "planners/unit_render.h"
#include "tests/support/systemd_sandbox.h"

namespace berth::testing {
namespace {

TEST(UnitVerify, RenderedUnitsOfEveryEnginePassSystemdAnalyzeVerify) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("berth-verify-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::string> units;
  for (EngineKind e :
       {EngineKind::kVllm, EngineKind::kSglang, EngineKind::kLlamaServer, EngineKind::kCommand}) {
    ServiceSpec s;
    s.name = std::string("verify-") + EngineName(e);
    s.has_engine = true;
    s.engine = e;
    s.gpus = {0, 1};
    s.port = 8000;
    s.vllm.tensor_parallel_size = 2;
    s.sglang.tp_size = 2;
    s.command = {"/bin/true", "run"};
    s.args = {"with space", "100%", "$HOME", "quote\"d", "back\\slash", "ünï", "two\nlines"};
    s.env = {{"A_VAR", "x y %z"}};
    s.env_file = "/etc/berth/secrets.env";
    RenderContext ctx;
    ctx.store = "/srv/models";
    ctx.model_repo = "org/name";
    ctx.snapshot_path = "/srv/models/models--org--name/snapshots/" + std::string(40, 'c');
    ctx.executable = "/bin/true";
    ctx.berth_version = "test";
    RenderedUnit u = RenderUnit(s, ctx);
    std::ofstream(dir / u.name) << u.content;
    units.push_back((dir / u.name).string());
  }
  std::vector<std::string> argv = {"systemd-analyze", "verify"};
  argv.insert(argv.end(), units.begin(), units.end());
  CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.exit_code, 0) << r.output << r.error;
  EXPECT_EQ(r.output, "") << "systemd-analyze had something to say";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace berth::testing
