// The engine check's apply-time pieces: the command runner with a given environment, systemd's
// EnvironmentFile= syntax, the environment a unit's process gets, and the command that runs the
// check with the interpreter of the unit's executable.
#include "providers/host/engine_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "providers/host/command_runner.h"
#include "tests/providers/temp_dir.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using testing::TempDir;

TEST(PosixCommandRunner, AGivenEnvironmentIsTheCommandsWholeEnvironment) {
  PosixCommandRunner run;
  std::vector<std::string> env = {"A=1", "B=two words", "C="};
  CommandResult r = run.Run({"/usr/bin/env"}, 10'000, &env);
  ASSERT_TRUE(r.ok()) << r.error << r.output_tail;
  EXPECT_EQ(r.output_tail, "A=1\nB=two words\nC=\n");
  std::vector<std::string> bad = {"NOEQUALS"};
  CommandResult refused = run.Run({"/usr/bin/env"}, 10'000, &bad);
  EXPECT_FALSE(refused.started);
  EXPECT_THAT(refused.error, HasSubstr("not KEY=VALUE"));
  std::vector<std::string> huge(CommandRunner::kMaxEnvEntries + 1, "X=1");
  EXPECT_THAT(run.Run({"/usr/bin/env"}, 10'000, &huge).error, HasSubstr("more than the 4096"));
}

TEST(EnvironmentFile, SystemdsSyntaxQuotesEscapesCommentsAndInvalidNames) {
  auto env = ParseEnvironmentFile(
      "# a comment\n"
      "; another\n"
      "PLAIN=value\n"
      "  SPACED  =   trailing spaces go   \n"
      "SINGLE='kept $literally \\n'\n"
      "DOUBLE=\"a \\\"quote\\\", a \\\\ and \\$x, but \\n stays\"\n"
      "ESCAPED=one\\ two\\\n"
      "three\n"
      "1BAD=digit first\n"
      "BAD-NAME=dash\n"
      "EMPTY=\n"
      "PLAIN=replaced\n"
      "LAST=no newline");
  EXPECT_THAT(env, ElementsAre(Pair("PLAIN", "replaced"), Pair("SPACED", "trailing spaces go"),
                               Pair("SINGLE", "kept $literally \\n"),
                               Pair("DOUBLE", "a \"quote\", a \\ and $x, but \\n stays"),
                               Pair("ESCAPED", "one twothree"), Pair("EMPTY", ""),
                               Pair("LAST", "no newline")));
}

class EngineCheckCommandTest : public ::testing::Test {
 protected:
  EngineCheckCommandTest() {
    a.address = "service/chat";
    a.As<PreflightStep>().engine = "vllm";
    a.As<PreflightStep>().check_program = "vllm_check.py";
  }
  static constexpr char kChecks[] = "/usr/libexec/berth/engine-check";
  static std::string Check(const std::string& name) { return std::string(kChecks) + "/" + name; }
  std::string Script(const std::string& rel, const std::string& text) {
    dir.Write(rel, text);
    ::chmod((dir / rel).c_str(), 0755);
    return dir / rel;
  }
  TempDir dir;
  Action a;
};

TEST_F(EngineCheckCommandTest, TheUnitsEnvironmentOverSystemdsPathWithItsFileLast) {
  dir.Write("chat.env", "HF_HUB_OFFLINE=0\nEXTRA=\"x y\"\n");
  a.As<PreflightStep>().env = {"CUDA_VISIBLE_DEVICES=0,1", "HF_HUB_OFFLINE=1",
                               "PATH=/opt/venv/bin:/usr/bin"};
  a.As<PreflightStep>().env_file = dir / "chat.env";
  Result<std::vector<std::string>> env = UnitEnvironment(a);
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_THAT(*env, ElementsAre("PATH=/opt/venv/bin:/usr/bin", "CUDA_VISIBLE_DEVICES=0,1",
                                "HF_HUB_OFFLINE=0", "EXTRA=x y"));
  a.As<PreflightStep>().env_file = dir / "missing.env";
  Result<std::vector<std::string>> missing = UnitEnvironment(a);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("systemd would not start the unit either"));
}

TEST_F(EngineCheckCommandTest, TheInterpreterOfTheUnitsVllm) {
  a.As<PreflightStep>().argv = {
      Script("venv/bin/vllm", "#!" + (dir / "venv/bin/python3") + "\nimport vllm\n"), "serve",
      "/models/x", "--port", "8000"};
  Script("venv/bin/python3", "");
  Result<std::vector<std::string>> cmd = EngineCheckCommand(a, {}, kChecks);
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_THAT(*cmd, ElementsAre(dir / "venv/bin/python3", Check("vllm_check.py"), "serve",
                                "/models/x", "--port", "8000"));
}

TEST_F(EngineCheckCommandTest, EnvPythonIsLookedUpAlongTheUnitsPath) {
  Script("bin/python3.12", "");
  a.As<PreflightStep>().argv = {Script("bin/vllm", "#!/usr/bin/env python3.12\n"), "serve", "m"};
  Result<std::vector<std::string>> cmd =
      EngineCheckCommand(a, {"PATH=/nowhere:" + (dir / "bin")}, kChecks);
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_THAT(*cmd, ElementsAre(dir / "bin/python3.12", Check("vllm_check.py"), "serve", "m"));
  Result<std::vector<std::string>> not_on_path = EngineCheckCommand(a, {"PATH=/nowhere"}, kChecks);
  ASSERT_FALSE(not_on_path.ok());
  EXPECT_THAT(not_on_path.status().message(), HasSubstr("no python3.12 is on the unit's PATH"));
}

TEST_F(EngineCheckCommandTest, AnythingButAPythonScriptIsRefusedSayingWhatToSet) {
  for (const std::string& first :
       {std::string("\x7f"
                    "ELF"),
        std::string("#!/bin/sh\n"), std::string("#!/usr/bin/env -S python3 -u\n"),
        std::string("#!") + std::string(300, 'x')}) {
    a.As<PreflightStep>().argv = {Script("vllm", first), "serve", "m"};
    Result<std::vector<std::string>> cmd = EngineCheckCommand(a, {"PATH=/usr/bin"}, kChecks);
    ASSERT_FALSE(cmd.ok()) << first;
    EXPECT_THAT(cmd.status().message(), HasSubstr("is not a Python program")) << first;
    EXPECT_THAT(cmd.status().message(), HasSubstr("preflight: {engine: off}")) << first;
  }
  // A plan names a program in berth's folder, nothing else; and the folder must be there.
  a.As<PreflightStep>().argv = {Script("venv/bin/vllm", "#!/usr/bin/python3\n"), "serve", "m"};
  a.As<PreflightStep>().check_program = "../../../tmp/evil.py";
  EXPECT_THAT(EngineCheckCommand(a, {}, kChecks).status().message(), HasSubstr("not a file name"));
  a.As<PreflightStep>().check_program = "vllm_check.py";
  EXPECT_THAT(EngineCheckCommand(a, {}, "").status().message(),
              HasSubstr("engine-check programs are not installed"));
  a.As<PreflightStep>().argv = {"no-such-vllm-anywhere", "serve", "m"};
  Result<std::vector<std::string>> bare = EngineCheckCommand(a, {}, kChecks);
  ASSERT_FALSE(bare.ok());
  EXPECT_THAT(bare.status().message(),
              HasSubstr("no-such-vllm-anywhere is not in /usr/local/sbin:/usr/local/bin:"
                        "/usr/sbin:/usr/bin, where systemd looks for it"));
}

TEST_F(EngineCheckCommandTest, SglangAndLlamaServer) {
  a.As<PreflightStep>().engine = "sglang";
  a.As<PreflightStep>().check_program = "sglang_check.py";
  a.As<PreflightStep>().argv = {Script("venv/bin/python3", ""), "-m", "sglang.launch_server",
                                "--model-path", "m"};
  Result<std::vector<std::string>> py = EngineCheckCommand(a, {}, kChecks);
  ASSERT_TRUE(py.ok()) << py.status().message();
  EXPECT_THAT(*py,
              ElementsAre(dir / "venv/bin/python3", Check("sglang_check.py"), "--model-path", "m"));
  a.As<PreflightStep>().argv = {Script("venv/bin/sglang", "#!" + (dir / "venv/bin/python3") + "\n"),
                                "serve", "--model-path", "m"};
  Result<std::vector<std::string>> script = EngineCheckCommand(a, {}, kChecks);
  ASSERT_TRUE(script.ok()) << script.status().message();
  EXPECT_THAT(*script,
              ElementsAre(dir / "venv/bin/python3", Check("sglang_check.py"), "--model-path", "m"));
}

TEST_F(EngineCheckCommandTest, LlamaServersOwnParserOnTheExactArgvThenHelp) {
  a.As<PreflightStep>().engine = "llama-server";
  a.As<PreflightStep>().check_program = "";
  a.As<PreflightStep>().argv = {"/opt/llama/llama-server", "--model", "m.gguf", "--port", "8080"};
  Result<std::vector<std::string>> llama = EngineCheckCommand(a, {}, kChecks);
  ASSERT_TRUE(llama.ok()) << llama.status().message();
  EXPECT_THAT(*llama, ElementsAre("/opt/llama/llama-server", "--model", "m.gguf", "--port", "8080",
                                  "--help"));
}

TEST_F(EngineCheckCommandTest, LlamaFitParamsGetsOnlyTheFlagsItAcceptsWithTheirValues) {
  a.As<PreflightStep>().engine = "llama-server";
  std::string server = Script("llama/llama-server", "");
  std::string fit = Script("llama/llama-fit-params", "");
  // What berth renders, then args of every shape: a value that looks like a flag (-1), a flag
  // of two values, a negatable one, a repeatable one, and flags llama-fit-params refuses with
  // their values (--port, --alias, --api-key, --jinja, --metrics).
  a.As<PreflightStep>().argv = {server,
                                "--model",
                                "/store/m.gguf",
                                "--alias",
                                "chat",
                                "--host",
                                "127.0.0.1",
                                "--port",
                                "8080",
                                "-ngl",
                                "-1",
                                "--ctx-size",
                                "1024",
                                "--parallel",
                                "2",
                                "--jinja",
                                "-ctk",
                                "q8_0",
                                "--api-key",
                                "k1",
                                "--api-key",
                                "k2",
                                "--control-vector-layer-range",
                                "1",
                                "3",
                                "--no-mmap",
                                "--metrics",
                                "--flash_attn",
                                "on",
                                "-ot",
                                "exps=CPU"};
  Result<std::vector<std::string>> cmd = LlamaFitParamsCommand(a, server);
  ASSERT_TRUE(cmd.ok()) << cmd.status().message();
  EXPECT_THAT(
      *cmd, ElementsAre(fit, "-v", "--model", "/store/m.gguf", "-ngl", "-1", "--ctx-size", "1024",
                        "--parallel", "2", "-ctk", "q8_0", "--control-vector-layer-range", "1", "3",
                        "--no-mmap", "--flash_attn", "on", "-ot", "exps=CPU"));
}

TEST_F(EngineCheckCommandTest, LlamaFitParamsMissingOrAFlagBerthDoesNotKnowSaysWhatToDo) {
  a.As<PreflightStep>().engine = "llama-server";
  std::string server = Script("llama/llama-server", "");
  a.As<PreflightStep>().argv = {server, "--model", "m.gguf"};
  Result<std::vector<std::string>> missing = LlamaFitParamsCommand(a, server);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              HasSubstr("no executable " + dir / "llama/llama-fit-params" + " next to " + server));
  EXPECT_THAT(missing.status().message(), HasSubstr("before the running server is stopped"));
  EXPECT_THAT(missing.status().message(), HasSubstr("Install llama.cpp's llama-fit-params"));
  EXPECT_THAT(missing.status().message(), HasSubstr("preflight: {engine: off}"));

  Script("llama/llama-fit-params", "");
  a.As<PreflightStep>().argv = {server, "--model", "m.gguf", "--newer-than-the-catalogue", "x"};
  Result<std::vector<std::string>> unknown = LlamaFitParamsCommand(a, server);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("'--newer-than-the-catalogue', which berth's catalogue of llama-server "
                        "(llama.cpp 80fb11a) does not know"));
  a.As<PreflightStep>().argv = {server, "--ctx-size=1024"};
  EXPECT_FALSE(LlamaFitParamsCommand(a, server).ok()) << "llama.cpp takes no --x=value";
}

}  // namespace
}  // namespace berth
