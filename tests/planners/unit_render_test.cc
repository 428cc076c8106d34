#include "planners/unit_render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/hash.h"

#include <functional>
#include <tuple>

namespace berth {
namespace {

using ::testing::HasSubstr;

ServiceSpec Svc() {
  ServiceSpec s;
  s.name = "vllm-x";
  s.has_engine = true;
  s.engine = EngineKind::kVllm;
  s.model = "x";
  s.gpus = {0, 1};
  s.port = 8000;
  s.vllm.tensor_parallel_size = 2;
  return s;
}

RenderContext Ctx() {
  RenderContext c;
  c.store = "/models";
  c.model_repo = "org/x";
  c.snapshot_path = "/models/models--org--x/snapshots/abc";
  c.executable = "/opt/vllm/bin/vllm";
  c.berth_version = "0.1.0";
  return c;
}

TEST(QuoteExecArg, EscapesByTheRulesOfSystemd) {
  EXPECT_EQ(QuoteExecArg("plain"), "\"plain\"");
  EXPECT_EQ(QuoteExecArg("a b"), "\"a b\"");
  EXPECT_EQ(QuoteExecArg("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(QuoteExecArg("50%"), "\"50%%\"");
  EXPECT_EQ(QuoteExecArg("$HOME"), "\"$$HOME\"");
  EXPECT_EQ(QuoteExecArg("a\\b"), "\"a\\\\b\"");
  EXPECT_EQ(QuoteExecArg("l1\nl2"), "\"l1\\nl2\"");
  EXPECT_EQ(QuoteExecArg(std::string("\x01", 1)), "\"\\x01\"");
}

TEST(QuoteExecArg, SplitReadsBackWhatQuoteWrote) {
  std::vector<std::string> argv = {"/bin/x", "a b", "{\"k\": 1}", "50%", "$X", "\\", "é", "l1\nl2"};
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + QuoteExecArg(a);
  EXPECT_EQ(SplitExecLine(line), argv);
}

TEST(RenderUnit, VllmFlagsEnvironmentAndHeader) {
  ServiceSpec s = Svc();
  s.vllm.enable_expert_parallel = true;
  s.args = {"--compilation-config", "{\"cudagraph_mode\": \"PIECEWISE\"}"};
  s.env["SAFETENSORS_FAST_GPU"] = "1";
  RenderedUnit u = RenderUnit(s, Ctx());
  EXPECT_EQ(u.name, "vllm-x.service");
  EXPECT_THAT(u.content,
              HasSubstr("ExecStart=\"/opt/vllm/bin/vllm\" \"serve\" "
                        "\"/models/models--org--x/snapshots/abc\" \"--served-model-name\" "
                        "\"vllm-x\" \"--host\" \"0.0.0.0\" \"--port\" \"8000\" "
                        "\"--tensor-parallel-size\" \"2\" \"--pipeline-parallel-size\" \"1\" "
                        "\"--enable-expert-parallel\" \"--gpu-memory-utilization\" \"0.9\" "
                        "\"--compilation-config\" "
                        "\"{\\\"cudagraph_mode\\\": \\\"PIECEWISE\\\"}\"\n"));
  EXPECT_THAT(u.content, HasSubstr("Environment=\"CUDA_VISIBLE_DEVICES=0,1\"\n"));
  EXPECT_THAT(u.content, HasSubstr("Environment=\"HF_HUB_OFFLINE=1\"\n"));
  EXPECT_THAT(u.content, HasSubstr("Environment=\"HF_HUB_CACHE=/models\"\n"));
  EXPECT_THAT(u.content, HasSubstr("Type=exec\n"));
  EXPECT_THAT(u.content, HasSubstr("KillMode=mixed\n"));
  EXPECT_THAT(u.content, HasSubstr("TimeoutStartSec=31m\n"));
  EXPECT_EQ(UnitSpecHash(u.content), u.spec_hash);
  EXPECT_EQ(Sha256Hex(UnitBody(u.content)), u.spec_hash);
}

// TimeoutStopSec= is the service's stop_timeout; the default is written as berth always wrote
// it, so that no unit berth wrote before changes.
TEST(RenderUnit, TheStopTimeoutBecomesTimeoutStopSec) {
  EXPECT_THAT(RenderUnit(Svc(), Ctx()).content, HasSubstr("\nTimeoutStopSec=2min\n"));
  ServiceSpec s = Svc();
  s.stop_timeout_ms = 5'000;
  EXPECT_THAT(RenderUnit(s, Ctx()).content, HasSubstr("\nTimeoutStopSec=5s\n"));
  s.stop_timeout_ms = 1'500;
  EXPECT_THAT(RenderUnit(s, Ctx()).content, HasSubstr("\nTimeoutStopSec=1500ms\n"));
}

TEST(RenderUnit, TheSpecHashIgnoresBerthsVersion) {
  RenderContext a = Ctx(), b = Ctx();
  b.berth_version = "9.9.9";
  EXPECT_EQ(RenderUnit(Svc(), a).spec_hash, RenderUnit(Svc(), b).spec_hash);
  EXPECT_NE(RenderUnit(Svc(), a).content, RenderUnit(Svc(), b).content);
}

TEST(DiffUnits, ADescriptionChangeNeedsNoRestart) {
  std::string a = RenderUnit(Svc(), Ctx()).content;
  std::string b = a;
  b.replace(b.find("Description="), 12, "Description=Renamed ");
  UnitDiff diff = DiffUnits(a, b);
  EXPECT_TRUE(diff.changed);
  EXPECT_FALSE(diff.needs_restart);
}

TEST(DiffUnits, ARestartSecChangeNeedsOnlyAReload) {
  std::string a = RenderUnit(Svc(), Ctx()).content;
  std::string b = a;
  b.replace(b.find("RestartSec=10"), 13, "RestartSec=30");
  UnitDiff diff = DiffUnits(a, b);
  EXPECT_TRUE(diff.changed);
  EXPECT_FALSE(diff.needs_restart);
  EXPECT_EQ(diff.reload_keys, std::vector<std::string>{"RestartSec"});
  EXPECT_TRUE(diff.restart_keys.empty());
  EXPECT_FALSE(diff.install_changed);
  EXPECT_EQ(diff.detail, "RestartSec changed: 10 → 30");
}

TEST(DiffUnits, AnExecStartChangeNeedsARestartAndAnInstallChangeIsNoted) {
  std::string a = RenderUnit(Svc(), Ctx()).content;
  std::string b = a;
  b.replace(b.find("\"8000\""), 6, "\"8001\"");
  b.replace(b.find("WantedBy=multi-user.target"), 26, "WantedBy=default.target");
  UnitDiff diff = DiffUnits(a, b);
  EXPECT_TRUE(diff.needs_restart);
  EXPECT_EQ(diff.restart_keys, std::vector<std::string>{"ExecStart"});
  EXPECT_EQ(diff.reload_keys, std::vector<std::string>{"WantedBy"});
  EXPECT_TRUE(diff.install_changed);
  EXPECT_THAT(diff.detail, HasSubstr("--port 8000 → 8001"));
}

TEST(DiffUnits, AnEnvironmentChangeIsNamed) {
  ServiceSpec s = Svc();
  std::string a = RenderUnit(s, Ctx()).content;
  s.env["NCCL_DEBUG"] = "INFO";
  UnitDiff diff = DiffUnits(a, RenderUnit(s, Ctx()).content);
  EXPECT_TRUE(diff.needs_restart);
  EXPECT_THAT(diff.detail, HasSubstr("Environment changed: +\"NCCL_DEBUG=INFO\""));
}

TEST(SplitExecLine, AMalformedEscapeIsKeptAsWrittenAndNeverThrows) {
  EXPECT_EQ(SplitExecLine("\"/bin/x\" \"a\\xZZb\""),
            (std::vector<std::string>{"/bin/x", "a\\xZZb"}));
  EXPECT_EQ(SplitExecLine("\"/bin/x\" \"a\\xZ\""), (std::vector<std::string>{"/bin/x", "a\\xZ"}));
  EXPECT_EQ(SplitExecLine("/bin/x a\\x"), (std::vector<std::string>{"/bin/x", "a\\x"}));
  EXPECT_EQ(SplitExecLine("/bin/x a\\"), (std::vector<std::string>{"/bin/x", "a\\"}));
  EXPECT_EQ(SplitExecLine("/bin/x \"\\x4A\\x4b\""), (std::vector<std::string>{"/bin/x", "JK"}));
  EXPECT_EQ(SplitExecLine("\"unterminated"), (std::vector<std::string>{"unterminated"}));
}

TEST(DiffUnits, AHandEditedExecStartWithABadEscapeIsStillDiffed) {
  std::string a = RenderUnit(Svc(), Ctx()).content;
  std::string b = a;
  b.replace(b.find("\"serve\""), 7, "\"s\\xZZ\"");
  UnitDiff diff = DiffUnits(b, a);
  EXPECT_TRUE(diff.needs_restart);
  EXPECT_THAT(diff.detail, HasSubstr("ExecStart changed"));
}

// Every byte but NUL, alone and between plain runs, comes back from ExecStart= as it was
// written (SplitExecLine, QuoteExecArg's inverse): the quoting copies plain runs whole and
// escapes the rest.
TEST(UnitValue, EveryByteOfAnArgumentComesBackFromTheExecLine) {
  for (int c = 1; c < 256; ++c) {
    for (const std::string& arg : {std::string(1, static_cast<char>(c)),
                                   "ab" + std::string(1, static_cast<char>(c)) + "cd%$\\\"e"}) {
      Result<std::string> quoted = UnitValue(UnitValueKind::kExecArg, "args", arg);
      ASSERT_TRUE(quoted.ok()) << c;
      std::vector<std::string> words = SplitExecLine("/bin/x " + *quoted);
      ASSERT_EQ(words.size(), 2u) << c << " " << *quoted;
      EXPECT_EQ(words[1], arg) << c << " " << *quoted;
    }
  }
}

TEST(UnitValue, EachDirectiveIsWrittenByItsOwnRules) {
  EXPECT_EQ(*UnitValue(UnitValueKind::kExecArg, "args", "%h $HOME"), "\"%%h $$HOME\"");
  EXPECT_EQ(*UnitValue(UnitValueKind::kEnvAssignment, "env A", "A=%n $X"), "\"A=%%n $X\"");
  EXPECT_EQ(*UnitValue(UnitValueKind::kPlain, "env_file", "/etc/%n$X"), "/etc/%%n$X");
  // Quoted words escape what would end the line; only NUL cannot be written.
  EXPECT_EQ(*UnitValue(UnitValueKind::kExecArg, "args", "a\nExecStartPre=/bin/x\r\t\x7f"),
            "\"a\\nExecStartPre=/bin/x\\r\\t\\x7f\"");
  EXPECT_EQ(*UnitValue(UnitValueKind::kEnvAssignment, "env A", "A=\nB"), "\"A=\\nB\"");
  for (UnitValueKind kind : {UnitValueKind::kExecArg, UnitValueKind::kEnvAssignment}) {
    Result<std::string> v = UnitValue(kind, "f", std::string("a\0b", 3));
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().message(), "f contains a NUL byte; a unit file value cannot");
  }
  for (const std::string& bad : {std::string("a\nb"), std::string("a\rb"), std::string("a\0b", 3),
                                 std::string("a\tb"), std::string("a\x1b"), std::string("a\x7f")}) {
    Result<std::string> v = UnitValue(UnitValueKind::kPlain, "f", bad);
    ASSERT_FALSE(v.ok());
    EXPECT_THAT(v.status().message(), HasSubstr("a unit file value cannot"));
  }
  EXPECT_THAT(UnitValue(UnitValueKind::kPlain, "env_file", "/x\\").status().message(),
              HasSubstr("ends with a backslash"));
  EXPECT_THAT(UnitValue(UnitValueKind::kPlain, "description", " x").status().message(),
              HasSubstr("starts or ends with a space"));
}

// Each field that reaches the unit, with what the manifest loader refuses first: the renderer
// refuses it again rather than write a second line.
TEST(RenderUnit, AValueNoUnitCanHoldIsRefusedNotWritten) {
  const std::string newline = "x\nExecStartPre=/bin/touch /tmp/pwned";
  const std::string nul("x\0ExecStartPre=/bin/touch /tmp/pwned", 36);
  using Set = std::function<void(ServiceSpec*, RenderContext*)>;
  std::vector<std::tuple<std::string, std::string, Set>> fields = {
      {"description", "a newline",
       [&](ServiceSpec* s, RenderContext*) { s->vllm.served_model_name = newline; }},
      {"description", "a newline",
       [&](ServiceSpec*, RenderContext* c) { c->model_repo = newline; }},
      {"env_file", "a newline",
       [&](ServiceSpec* s, RenderContext*) { s->env_file = "/etc/" + newline; }},
      {"ExecStart argument", "a NUL byte",
       [&](ServiceSpec* s, RenderContext*) {
         s->args = {"--ok", nul};
       }},
      {"ExecStart argument", "a NUL byte", [&](ServiceSpec* s, RenderContext*) { s->bind = nul; }},
      {"ExecStart argument", "a NUL byte",
       [&](ServiceSpec*, RenderContext* c) { c->snapshot_path = nul; }},
      {"executable", "a NUL byte", [&](ServiceSpec*, RenderContext* c) { c->executable = nul; }},
      {"env A", "a NUL byte", [&](ServiceSpec* s, RenderContext*) { s->env["A"] = nul; }},
      {"env HF_HUB_CACHE", "a NUL byte", [&](ServiceSpec*, RenderContext* c) { c->store = nul; }},
  };
  for (const auto& [field, what, set] : fields) {
    SCOPED_TRACE(field);
    ServiceSpec s = Svc();
    RenderContext c = Ctx();
    set(&s, &c);
    Result<RenderedUnit> r = TryRenderUnit(s, c);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().message(), HasSubstr(field));
    EXPECT_THAT(r.status().message(), HasSubstr("contains " + what + "; a unit file value cannot"));
    RenderedUnit old = RenderUnit(s, c);
    EXPECT_THAT(old.refused, HasSubstr("a unit file value cannot"));
    EXPECT_EQ(old.content.find("ExecStartPre"), std::string::npos);
    EXPECT_EQ(old.content.find("[Service]"), std::string::npos);
    EXPECT_EQ(old.content.find('\0'), std::string::npos);
    EXPECT_EQ(UnitSpecHash(old.content), old.spec_hash);
  }
}

// A newline in an argument or an env value stays inside its quoted word: one ExecStart= line,
// no ExecStartPre=, and systemd hands the process the newline (tests/e2e/systemd_test.cc).
TEST(RenderUnit, ANewlineInAQuotedWordAddsNoDirective) {
  ServiceSpec s = Svc();
  s.args = {"x\nExecStartPre=/bin/touch /tmp/pwned"};
  s.env["A"] = "y\nExecStartPre=/bin/touch /tmp/pwned";
  Result<RenderedUnit> r = TryRenderUnit(s, Ctx());
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const auto& [key, value] : ParseUnitEntries(r->content))
    EXPECT_NE(key, "Service.ExecStartPre") << value;
  EXPECT_THAT(r->content, HasSubstr(" \"x\\nExecStartPre=/bin/touch /tmp/pwned\"\n"));
  EXPECT_THAT(r->content, HasSubstr("Environment=\"A=y\\nExecStartPre=/bin/touch /tmp/pwned\"\n"));
}

TEST(RenderUnit, LlamaAliasWithANewlineIsRefused) {
  ServiceSpec s = Svc();
  s.engine = EngineKind::kLlamaServer;
  s.llama.alias = "a\nExecStartPre=/bin/touch /tmp/pwned";
  EXPECT_FALSE(TryRenderUnit(s, Ctx()).ok());
}

TEST(RenderUnit, LlamaServerGetsItsGgufFileAndEveryLayerOnTheGpus) {
  ServiceSpec s = Svc();
  s.engine = EngineKind::kLlamaServer;
  s.llama.model_file = "Q4_K_M/m.gguf";
  s.llama.jinja = true;
  RenderContext c = Ctx();
  c.executable = "/opt/llama/bin/llama-server";
  std::string unit = RenderUnit(s, c).content;
  EXPECT_THAT(unit, HasSubstr("ExecStart=\"/opt/llama/bin/llama-server\" \"--model\" "
                              "\"/models/models--org--x/snapshots/abc/Q4_K_M/m.gguf\""));
  EXPECT_THAT(unit, HasSubstr("\"--n-gpu-layers\" \"all\" \"--jinja\""));
}

TEST(RenderUnit, TrtllmServeGetsItsSubcommandAndUnderscoreFlags) {
  ServiceSpec s = Svc();
  s.engine = EngineKind::kTrtllm;
  s.trtllm.tp_size = 2;
  RenderContext c = Ctx();
  c.executable = "/opt/trt/bin/trtllm-serve";
  RenderedUnit u = RenderUnit(s, c);
  EXPECT_THAT(u.content, HasSubstr("Description=trtllm-serve serving vllm-x"));
  EXPECT_THAT(u.content,
              HasSubstr("ExecStart=\"/opt/trt/bin/trtllm-serve\" \"serve\" "
                        "\"/models/models--org--x/snapshots/abc\" \"--host\" \"0.0.0.0\" "
                        "\"--port\" \"8000\" \"--tp_size\" \"2\" \"--pp_size\" \"1\"\n"));
}

TEST(RenderUnit, SpecifiersAndDollarsReachEveryDirectiveEscaped) {
  ServiceSpec s = Svc();
  s.vllm.served_model_name = "m-%n-$X";
  s.args = {"%h", "$HOME", "${X}"};
  s.env["A"] = "%h $X";
  s.env_file = "/etc/%n$X";
  Result<RenderedUnit> r = TryRenderUnit(s, Ctx());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_THAT(r->content, HasSubstr("Description=vllm serving m-%%n-$X (org/x) on port 8000\n"));
  EXPECT_THAT(r->content, HasSubstr("\"--served-model-name\" \"m-%%n-$$X\""));
  EXPECT_THAT(r->content, HasSubstr("\"%%h\" \"$$HOME\" \"$${X}\"\n"));
  EXPECT_THAT(r->content, HasSubstr("Environment=\"A=%%h $X\"\n"));
  EXPECT_THAT(r->content, HasSubstr("EnvironmentFile=/etc/%%n$X\n"));
  EXPECT_EQ(RenderUnit(s, Ctx()).content, r->content);
  EXPECT_TRUE(RenderUnit(s, Ctx()).refused.empty());
}

}  // namespace
}  // namespace berth
