// berth with a real model server (issue 38): one llama-server service `chat` on a tiny
// random-weight GGUF (tests/e2e/real_engine_fixture.h says how the real-engine suites run).
#include <gmock/gmock.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/cli/commands.h"
#include "tests/e2e/real_engine_fixture.h"

namespace berth::testing {
namespace {

using ::testing::HasSubstr;

class RealEngineTest : public RealEngineSuite {
 protected:
  void SetUp() override {
    RealEngineSuite::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    port_ = FreePort();
  }

  // One llama-server service `name` serving model `model` on port_, with a smoke gate.
  std::string Manifest(const std::string& model, const std::string& more = "") {
    std::ostringstream m;
    m << HostSection() << "models:\n  " << model << ": {source: hf://org/" << model
      << ", revision: " << kGgufCommit << "}\n"
      << "services:\n  chat:\n    model: " << model << "\n    engine: llama-server\n"
      << "    port: " << port_
      << "\n    bind: 127.0.0.1\n"
      // One thread: llama.cpp's threads spin on their barrier, and on 2 cores shared with
      // another test (ctest -j2) a second one waiting for a core made 16 tokens take seconds.
      << "    llama_server: {model_file: model.gguf, n_gpu_layers: 0, ctx_size: 1024, "
         "parallel: 2, threads: 1, alias: tiny-chat}\n"
      << "    health: {timeout: 60s, interval: 10ms}\n"
      << "    gates:\n      smoke: {prompt: Say hello., max_tokens: 8, timeout: 30s}\n"
      << more;
    return WriteManifest(m.str());
  }

  int Apply(const std::string& manifest) { return ApplyIn(manifest, out_, err_); }

  // The berth binary (which finds build/engine-check/ beside it, so its plans have the engine
  // check) with `verb` on `manifest`; the state in the same folder as Apply's.
  CommandResult Berth(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {BERTH_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--state-dir", (tmp_ / "state").string()});
    if (args[0] == "apply")
      argv.insert(argv.end(), {"--yes", "--bus", sandbox_->system_bus_address(), "--journal-dir",
                               sandbox_->journal_dir()});
    return RunCommand(argv, {}, std::chrono::seconds(120));
  }
  std::string Invocation() {
    auto units = systemd_->GetUnits({"chat.service"});
    return units.ok() ? (*units)[0].invocation_id : "";
  }

  std::string Get(const std::string& path) { return RealEngineSuite::Get(port_, path); }

  int port_ = 0;
  std::ostringstream out_, err_;
};

// The real engine from nothing: berth writes the unit, starts llama-server, and its health gate
// sees the real 503 "Loading model" turn 200; /v1/models lists the alias berth passed; the
// smoke gate gets text from the real model and the throughput floor measures it; a second
// apply finds nothing to do.
TEST_F(RealEngineTest, ALlamaServerStartsPassesItsGatesAndServesItsAlias) {
  MakeGguf("tiny");
  const std::string m = Manifest(
      "tiny", "      floor: {concurrency: 2, duration: 4s, max_tokens: 8, output_tps: 1}\n");
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("smoke: chat.service answered in")) << out_.str();
  EXPECT_THAT(out_.str(), HasSubstr("output tok/s")) << "the throughput floor measured it\n"
                                                     << out_.str();
  auto models = nlohmann::json::parse(Get("/v1/models"), nullptr, false);
  ASSERT_FALSE(models.is_discarded()) << Get("/v1/models");
  EXPECT_EQ(models["data"][0].value("id", ""), "tiny-chat") << models.dump();
  EXPECT_THAT(Get("/health"), HasSubstr("ok"));
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("No changes")) << out_.str();
}

// The operator's prober (tests/prober/prober.py) on the real server for 3 s: requests every 10 ms
// and two streams held back to back. llama-server streams a control token as a chunk without
// text and ends a stream at EOS: the prober judges a stream by what the engine reports
// (finish_reason, usage, timings), so every stream completes and nothing fails (it counted 39
// streams of a real switch incomplete when it counted text chunks).
TEST_F(RealEngineTest, TheProberCountsEveryStreamOfTheRealServerAsTheServerReportsIt) {
  MakeGguf("tiny");
  ASSERT_EQ(Apply(Manifest("tiny")), kExitOk) << out_.str() << err_.str();
  const std::string summary = (tmp_ / "prober.json").string();
  CommandResult r =
      RunCommand({"/usr/bin/python3", SourceDir() + "/tests/prober/prober.py", "--url",
                  "http://127.0.0.1:" + std::to_string(port_), "--interval-ms", "10",
                  "--completions", "--streams", "2", "--stream-tokens", "64", "--duration", "3",
                  "--timeout", "30", "--out", summary},
                 {}, std::chrono::seconds(90));
  ASSERT_TRUE(r.ok()) << r.output << r.error;
  auto s = nlohmann::json::parse(ReadAll(summary), nullptr, false);
  ASSERT_FALSE(s.is_discarded()) << r.output;
  EXPECT_EQ(s.value("failed", -1), 0) << s.dump();
  EXPECT_GT(s.value("streams_started", 0), 0) << s.dump();
  EXPECT_EQ(s.value("streams_completed", -1), s.value("streams_started", -2)) << s.dump();
  EXPECT_EQ(s["counts"].value("stream_incomplete", -1), 0) << s.dump();
}

// A file that is not a GGUF (wrong magic): the plan reads its header and is blocked before
// anything starts. One cut short (its header intact): the real server exits on it, the health
// gate says so (exit 4) instead of calling a dead server healthy, and nothing serves.
TEST_F(RealEngineTest, AModelFileTheServerCannotLoadIsCaughtBeforeOrAtItsHealthGate) {
  MakeGguf("magic", {"--bad-magic"});
  EXPECT_EQ(Apply(Manifest("magic")), kExitBlocked) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("model.gguf of org/magic@1111111 is not a GGUF file (it "
                                    "starts with 'NOPE', not 'GGUF'), so llama-server cannot "
                                    "load it"))
      << out_.str();
  auto units = systemd_->GetUnits({"chat.service"});
  ASSERT_TRUE(units.ok()) << units.status().message();
  EXPECT_NE((*units)[0].active_state, "active") << "nothing was started";

  MakeGguf("cut", {"--truncate", "4096"});
  EXPECT_EQ(Apply(Manifest("cut")), kExitFailed) << out_.str() << err_.str();
  EXPECT_THAT(err_.str(), HasSubstr("step 4 (wait-healthy service/chat): chat.service exited"))
      << err_.str();
  EXPECT_EQ(Get("/health"), "") << "nothing serves a model that does not load";
}

// llama-server's engine check, before anything is stopped: llama-server's own parser on the
// exact argv (`... --help`: every handler and value, no weights), then llama-fit-params next to
// it on the model file and context (the flags it accepts). A good configuration passes both and
// apply prints llama-fit-params' memory breakdown. A flag llama.cpp does not have, and a model
// file cut short (its header and tensor table intact, so the plan's GGUF reading passes it), are
// refused by the check with llama.cpp's words: the running server is never stopped and keeps
// serving, and `berth history` says why each apply failed.
TEST_F(RealEngineTest, ABadFlagOrACorruptModelIsRefusedBeforeTheRunningServerIsStopped) {
  MakeGguf("tiny");
  MakeGguf("cut", {"--truncate", "1000000"});
  CommandResult r = Berth({"apply", "-f", Manifest("tiny")});
  ASSERT_TRUE(r.ok()) << r.output << r.error;
  EXPECT_THAT(r.output, HasSubstr("engine check: llama-server's own argument parser")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("engine check of service/chat: llama-fit-params: |   - Host"))
      << r.output;
  EXPECT_THAT(r.output, HasSubstr("llama-fit-params: projected to use ")) << r.output;
  const std::string serving = Invocation();
  ASSERT_FALSE(serving.empty());

  r = Berth({"apply", "-f", Manifest("tiny", "    args: [--no-such-flag]\n")});
  EXPECT_EQ(r.exit_code, kExitFailed) << r.output << r.error;
  EXPECT_THAT(r.output, HasSubstr("the engine check of service/chat failed: llama.cpp refused "
                                  "this configuration: error: invalid argument: --no-such-flag; "
                                  "nothing was stopped or started"))
      << r.output << r.error;
  EXPECT_EQ(Invocation(), serving) << "chat.service was never stopped";
  EXPECT_THAT(Get("/health"), HasSubstr("ok"));

  r = Berth({"apply", "-f", Manifest("cut")});
  EXPECT_EQ(r.exit_code, kExitFailed) << r.output << r.error;
  EXPECT_THAT(r.output, HasSubstr("the engine check of service/chat failed: llama.cpp's "
                                  "llama-fit-params refused this configuration: llama_model_load: "
                                  "error loading model: tensor 'token_embd.weight' data is not "
                                  "within the file bounds"))
      << r.output << r.error;
  EXPECT_EQ(Invocation(), serving) << "chat.service was never stopped";
  EXPECT_THAT(Get("/v1/models"), HasSubstr("tiny-chat")) << "the old model still serves";

  r = Berth({"history", "-o", "json"});
  ASSERT_TRUE(r.ok()) << r.output << r.error;
  auto history = nlohmann::json::parse(r.output, nullptr, false)["applies"];
  ASSERT_TRUE(history.is_array() && history.size() == 3) << r.output;
  EXPECT_EQ(history[1].value("outcome", ""), "failed");
  EXPECT_THAT(history[1].value("message", ""), HasSubstr("invalid argument: --no-such-flag"));
  EXPECT_EQ(history[1].value("steps_done", -1), 0);
  EXPECT_EQ(history[2].value("outcome", ""), "failed");
  EXPECT_THAT(history[2].value("message", ""), HasSubstr("llama-fit-params refused"));
  EXPECT_EQ(history[2].value("steps_done", -1), 0);
}

// kill -9 of the real server: the unit berth wrote has systemd start it again (Restart=on-failure,
// RestartSec=10), the same model comes back on the same port, and the next apply finds the host
// as the manifest says, the server up under a new pid.
TEST_F(RealEngineTest, AServerKilledMinus9ComesBackUnderItsUnitAndTheNextApplyConverges) {
  MakeGguf("tiny");
  const std::string m = Manifest("tiny");
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  auto before = systemd_->GetUnits({"chat.service"});
  ASSERT_TRUE(before.ok() && (*before)[0].main_pid > 0);
  CommandResult killed =
      sandbox_->PidnsExec({"/bin/kill", "-9", std::to_string((*before)[0].main_pid)});
  ASSERT_TRUE(killed.ok()) << killed.output << killed.error;
  ASSERT_TRUE(WaitFor([&] { return Get("/health").empty(); }, std::chrono::seconds(10)))
      << "llama-server still answers after kill -9";
  ASSERT_TRUE(WaitFor([&] { return Get("/health").find("ok") != std::string::npos; },
                      std::chrono::seconds(40)))
      << "systemd did not bring llama-server back";
  ASSERT_EQ(Apply(m), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("No changes")) << out_.str();
  auto after = systemd_->GetUnits({"chat.service"});
  ASSERT_TRUE(after.ok());
  EXPECT_NE((*after)[0].main_pid, (*before)[0].main_pid);
  EXPECT_EQ((*after)[0].active_state, "active");
  EXPECT_NE(Get("/v1/models").find("tiny-chat"), std::string::npos);
}

}  // namespace
}  // namespace berth::testing
