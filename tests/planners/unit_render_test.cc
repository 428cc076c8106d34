#include "planners/unit_render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/core/hash.h"

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
  s.args = {"--speculative-config", "{\"method\": \"mtp\"}"};
  s.env["VLLM_USE_V1"] = "1";
  RenderedUnit u = RenderUnit(s, Ctx());
  EXPECT_EQ(u.name, "vllm-x.service");
  EXPECT_THAT(u.content,
              HasSubstr("ExecStart=\"/opt/vllm/bin/vllm\" \"serve\" "
                        "\"/models/models--org--x/snapshots/abc\" \"--served-model-name\" "
                        "\"vllm-x\" \"--host\" \"0.0.0.0\" \"--port\" \"8000\" "
                        "\"--tensor-parallel-size\" \"2\" \"--pipeline-parallel-size\" \"1\" "
                        "\"--enable-expert-parallel\" \"--gpu-memory-utilization\" \"0.9\" "
                        "\"--speculative-config\" \"{\\\"method\\\": \\\"mtp\\\"}\"\n"));
  EXPECT_THAT(u.content, HasSubstr("Environment=\"CUDA_VISIBLE_DEVICES=0,1\"\n"));
  EXPECT_THAT(u.content, HasSubstr("Environment=\"HF_HUB_OFFLINE=1\"\n"));
  EXPECT_THAT(u.content, HasSubstr("Environment=\"HF_HUB_CACHE=/models\"\n"));
  EXPECT_THAT(u.content, HasSubstr("Type=exec\n"));
  EXPECT_THAT(u.content, HasSubstr("KillMode=mixed\n"));
  EXPECT_THAT(u.content, HasSubstr("TimeoutStartSec=31m\n"));
  EXPECT_EQ(UnitSpecHash(u.content), u.spec_hash);
  EXPECT_EQ(Sha256Hex(UnitBody(u.content)), u.spec_hash);
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

TEST(DiffUnits, AnEnvironmentChangeIsNamed) {
  ServiceSpec s = Svc();
  std::string a = RenderUnit(s, Ctx()).content;
  s.env["NCCL_DEBUG"] = "INFO";
  UnitDiff diff = DiffUnits(a, RenderUnit(s, Ctx()).content);
  EXPECT_TRUE(diff.needs_restart);
  EXPECT_THAT(diff.detail, HasSubstr("Environment changed: +\"NCCL_DEBUG=INFO\""));
}

}  // namespace
}  // namespace berth
