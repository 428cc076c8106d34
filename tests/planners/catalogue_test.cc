#include "planners/servers/catalogue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "planners/servers/adapter.h"

namespace berth {
namespace {

using ::testing::Contains;
using ::testing::Not;

constexpr CatalogueEngine kEngines[] = {CatalogueEngine::kVllm, CatalogueEngine::kSglang,
                                        CatalogueEngine::kLlamaServer, CatalogueEngine::kTrtllm};

TEST(EngineCatalogue, EveryEmbeddedCatalogueParsesAndNamesItsCommit) {
  for (auto e : kEngines) {
    const EngineCatalogue& c = Catalogue(e);
    SCOPED_TRACE(c.engine);
    EXPECT_EQ(c.engine, CatalogueEngineName(e));
    EXPECT_FALSE(c.release.empty());
    EXPECT_TRUE(std::regex_match(c.commit, std::regex("[0-9a-f]{40}"))) << c.commit;
    EXPECT_GT(c.flags.size(), 20u);
    for (const auto& f : c.flags) {
      EXPECT_TRUE(f.name.starts_with("-")) << f.name;
      EXPECT_EQ(c.Find(f.name), &f);
      for (const auto& a : f.aliases) EXPECT_EQ(c.Find(a), &f) << a;
    }
  }
  // Parsed once: the same object every time.
  EXPECT_EQ(&Catalogue(CatalogueEngine::kVllm), &Catalogue(CatalogueEngine::kVllm));
}

RenderContext Ctx(std::string executable) {
  RenderContext c;
  c.store = "/models";
  c.model_repo = "org/x";
  c.snapshot_path = "/models/models--org--x/snapshots/abc";
  c.executable = std::move(executable);
  return c;
}

// Every option berth renders today (planners/engine_argv.cc, all optional keys set) is one the
// engine's parser accepts at the catalogued release, and none is deprecated there.
void ExpectRenderedFlagsKnown(CatalogueEngine e, const ServiceSpec& s, const RenderContext& ctx) {
  const EngineCatalogue& c = Catalogue(e);
  std::vector<std::string> argv = ServiceArgv(s, ctx);
  int flags = 0;
  for (size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (!a.starts_with("--") && !(a.size() == 2 && a[0] == '-' && a != "-m")) continue;
    const CatalogueFlag* f = c.Find(a);
    ASSERT_NE(f, nullptr) << c.engine << " at " << c.commit << " has no " << a;
    EXPECT_FALSE(f->deprecated) << c.engine << " marks " << a << " deprecated";
    if (f->takes_value) {
      ASSERT_LT(i + 1, argv.size()) << a << " needs a value";
      if (!f->choices.empty()) {
        EXPECT_THAT(f->choices, Contains(argv[i + 1])) << a;
      }
      ++i;
    }
    ++flags;
  }
  EXPECT_GE(flags, 5) << c.engine;
}

TEST(EngineCatalogue, FlagsBerthRendersForVllmAreAccepted) {
  ServiceSpec s;
  s.name = "vllm-x";
  s.has_engine = true;
  s.engine = EngineKind::kVllm;
  s.model = "x";
  s.port = 8000;
  s.vllm.tensor_parallel_size = 4;
  s.vllm.data_parallel_size = 2;
  s.vllm.enable_expert_parallel = true;
  s.vllm.max_model_len = 4096;
  s.vllm.trust_remote_code = true;
  s.vllm.kv_cache_dtype = "fp8";
  s.vllm.tool_call_parser = "minimax_m2";
  s.vllm.reasoning_parser = "minimax_m2_append_think";
  s.vllm.speculative = VllmSpeculative{"eagle3", 3, "x", 1, {}, {}};
  ExpectRenderedFlagsKnown(CatalogueEngine::kVllm, s, Ctx("/opt/vllm/bin/vllm"));
}

TEST(EngineCatalogue, FlagsBerthRendersForSglangAreAccepted) {
  ServiceSpec s;
  s.name = "sglang-x";
  s.has_engine = true;
  s.engine = EngineKind::kSglang;
  s.model = "x";
  s.port = 30000;
  s.sglang.tp_size = 8;
  s.sglang.context_length = 8192;
  ExpectRenderedFlagsKnown(CatalogueEngine::kSglang, s, Ctx("python3"));
}

TEST(EngineCatalogue, FlagsBerthRendersForLlamaServerAreAccepted) {
  ServiceSpec s;
  s.name = "llama-x";
  s.has_engine = true;
  s.engine = EngineKind::kLlamaServer;
  s.model = "x";
  s.port = 8080;
  s.llama.ctx_size = 8192;
  s.llama.model_file = "x.gguf";
  ExpectRenderedFlagsKnown(CatalogueEngine::kLlamaServer, s, Ctx("llama-server"));
}

TEST(EngineCatalogue, FindsByAliasNegativeFormValueAndUnderscoreSpelling) {
  const EngineCatalogue& vllm = Catalogue(CatalogueEngine::kVllm);
  ASSERT_NE(vllm.Find("-tp"), nullptr);
  EXPECT_EQ(vllm.Find("-tp")->name, "--tensor-parallel-size");
  EXPECT_EQ(vllm.Find("-dp")->name, "--data-parallel-size");
  EXPECT_TRUE(vllm.Find("--tensor-parallel-size")->takes_value);
  EXPECT_EQ(vllm.Find("--no-trust-remote-code"), vllm.Find("--trust-remote-code"));
  EXPECT_FALSE(vllm.Find("--trust-remote-code")->takes_value);
  EXPECT_EQ(vllm.Find("--port=9000"), vllm.Find("--port"));
  // vLLM's FlexibleArgumentParser reads --max_model_len as --max-model-len.
  EXPECT_EQ(vllm.Find("--max_model_len"), vllm.Find("--max-model-len"));
  EXPECT_EQ(vllm.Find("--no-such-flag"), nullptr);
  EXPECT_THAT(vllm.Find("--kv-cache-dtype")->choices, Contains("fp8"));

  const EngineCatalogue& sglang = Catalogue(CatalogueEngine::kSglang);
  EXPECT_EQ(sglang.Find("--tensor-parallel-size")->name, "--tp-size");
  EXPECT_EQ(sglang.Find("--data-parallel-size")->name, "--dp-size");
  EXPECT_EQ(sglang.Find("--ep")->name, "--ep-size");
  EXPECT_EQ(sglang.Find("--model")->name, "--model-path");
  EXPECT_EQ(sglang.Find("--tp_size"), nullptr) << "SGLang's argparse takes no underscores";
  EXPECT_THAT(sglang.Find("--kv-cache-dtype")->choices, Contains("fp8_e4m3"));

  const EngineCatalogue& llama = Catalogue(CatalogueEngine::kLlamaServer);
  EXPECT_EQ(llama.Find("-ngl"), llama.Find("--n-gpu-layers"));
  EXPECT_EQ(llama.Find("--no-jinja"), llama.Find("--jinja"));
  EXPECT_FALSE(llama.Find("--jinja")->takes_value);
  EXPECT_EQ(llama.Find("-sm")->choices,
            (std::vector<std::string>{"none", "layer", "row", "tensor"}));
  EXPECT_EQ(llama.Find("--prompt"), nullptr) << "llama-server excludes --prompt";

  const EngineCatalogue& trt = Catalogue(CatalogueEngine::kTrtllm);
  ASSERT_NE(trt.Find("--tp_size"), nullptr);
  EXPECT_EQ(trt.Find("--tp-size"), nullptr) << "click takes the underscore spelling only";
  EXPECT_FALSE(trt.Find("--trust_remote_code")->takes_value);
}

TEST(EngineCatalogue, LlamaServerFlagsSayHowManyValuesAndWhetherFitParamsTakesThem) {
  const EngineCatalogue& llama = Catalogue(CatalogueEngine::kLlamaServer);
  EXPECT_EQ(llama.Find("--jinja")->values, 0);
  EXPECT_EQ(llama.Find("-c")->values, 1);
  EXPECT_EQ(llama.Find("--control-vector-layer-range")->values, 2);
  EXPECT_TRUE(llama.Find("--model")->fit_params);
  EXPECT_TRUE(llama.Find("-ngl")->fit_params);
  EXPECT_FALSE(llama.Find("--port")->fit_params) << "llama-fit-params refuses --port";
  EXPECT_FALSE(llama.Find("--alias")->fit_params);
  // Other engines' catalogues have no "values": it follows takes_value.
  EXPECT_EQ(Catalogue(CatalogueEngine::kVllm).Find("--tensor-parallel-size")->values, 1);
}

TEST(EngineCatalogue, DeprecatedMarkingIsRead) {
  EXPECT_TRUE(Catalogue(CatalogueEngine::kVllm).Find("--disable-log-requests")->deprecated);
  EXPECT_FALSE(Catalogue(CatalogueEngine::kVllm).Find("--enable-log-requests")->deprecated);
  EXPECT_TRUE(Catalogue(CatalogueEngine::kSglang).Find("--disable-cuda-graph")->deprecated);
  EXPECT_TRUE(Catalogue(CatalogueEngine::kLlamaServer).Find("--defrag-thold")->deprecated);
}

TEST(EngineCatalogue, TablesNameTheParsersAndTheMtpModelTypes) {
  const EngineCatalogue& vllm = Catalogue(CatalogueEngine::kVllm);
  EXPECT_TRUE(vllm.InTable("tool_call_parsers", "minimax_m2"));
  EXPECT_TRUE(vllm.InTable("reasoning_parsers", "minimax_m2_append_think"));
  EXPECT_TRUE(vllm.InTable("architectures", "MiniMaxM2ForCausalLM"));
  EXPECT_TRUE(vllm.InTable("speculative_methods", "mtp"));
  EXPECT_TRUE(vllm.InTable("mtp_model_types", "deepseek_v3"));
  // The seed example's mistake: vLLM maps no minimax_m2 config to an MTP draft.
  EXPECT_FALSE(vllm.InTable("mtp_model_types", "minimax_m2"));
  EXPECT_TRUE(vllm.InTable("kv_cache_dtypes", "fp8"));

  const EngineCatalogue& sglang = Catalogue(CatalogueEngine::kSglang);
  EXPECT_TRUE(sglang.InTable("tool_call_parsers", "minimax-m2"));
  EXPECT_TRUE(sglang.InTable("reasoning_parsers", "minimax-append-think"));
  EXPECT_TRUE(sglang.InTable("subcommands", "serve"));
  EXPECT_TRUE(Catalogue(CatalogueEngine::kLlamaServer).InTable("kv_cache_dtypes", "q8_0"));

  EXPECT_TRUE(vllm.Table("no_such_table").empty());
  EXPECT_FALSE(vllm.InTable("no_such_table", "x"));
  EXPECT_THAT(Catalogue(CatalogueEngine::kTrtllm).Table("tool_call_parsers"), Not(Contains("x")));
}

// Every key of the SGLang, llama.cpp and trtllm-serve sections set at once: each flag berth
// renders for them is one the engine accepts at its catalogued release, with an accepted value.
TEST(EngineCatalogue, EverySglangKeyRendersAFlagSglangAccepts) {
  ServiceSpec s;
  s.name = "sglang-x";
  s.has_engine = true;
  s.engine = EngineKind::kSglang;
  s.model = "x";
  s.port = 30000;
  SglangOptions& o = s.sglang;
  o.tp_size = 8;
  o.dp_size = 8;
  o.ep_size = 8;
  o.enable_dp_attention = true;
  o.context_length = 8192;
  o.served_model_name = "chat";
  o.trust_remote_code = true;
  o.tool_call_parser = "minimax-m2";
  o.reasoning_parser = "minimax-append-think";
  o.kv_cache_dtype = "fp8_e4m3";
  o.speculative = {"EAGLE3", 3, 1, 4, "head"};
  s.draft_model = "head";
  RenderContext c = Ctx("python3");
  c.draft_snapshot_path = "/models/models--org--head/snapshots/def";
  ExpectRenderedFlagsKnown(CatalogueEngine::kSglang, s, c);
  // The values come from the same tables the manifest is checked against.
  const EngineCatalogue& sg = Catalogue(CatalogueEngine::kSglang);
  EXPECT_TRUE(sg.InTable("speculative_methods", o.speculative.algorithm));
  EXPECT_TRUE(sg.InTable("kv_cache_dtypes", o.kv_cache_dtype));
  // The flag berth refuses in args is one SGLang has (its other spellings may be newer or
  // older than the catalogued release: argparse's --tp, trtllm-serve's --tensor_parallel_size).
  for (const OwnedFlag& f : AdapterFor(EngineKind::kSglang).OwnedFlags(s))
    EXPECT_NE(sg.Find(f.spellings[0]), nullptr) << f.spellings[0];
}

TEST(EngineCatalogue, EveryLlamaServerKeyRendersAFlagLlamaServerAccepts) {
  ServiceSpec s;
  s.name = "llama-x";
  s.has_engine = true;
  s.engine = EngineKind::kLlamaServer;
  s.model = "x";
  s.port = 8080;
  LlamaServerOptions& o = s.llama;
  o.model_file = "x.gguf";
  o.ctx_size = 8192;
  o.alias = "small";
  o.jinja = true;
  o.parallel = 4;
  o.cache_type_k = "q8_0";
  o.cache_type_v = "q8_0";
  o.split_mode = "row";
  ExpectRenderedFlagsKnown(CatalogueEngine::kLlamaServer, s, Ctx("llama-server"));
  const EngineCatalogue& ll = Catalogue(CatalogueEngine::kLlamaServer);
  for (const OwnedFlag& f : AdapterFor(EngineKind::kLlamaServer).OwnedFlags(s))
    EXPECT_NE(ll.Find(f.spellings[0]), nullptr) << f.spellings[0];
}

TEST(EngineCatalogue, EveryTrtllmKeyRendersAFlagTrtllmServeAccepts) {
  ServiceSpec s;
  s.name = "trt-x";
  s.has_engine = true;
  s.engine = EngineKind::kTrtllm;
  s.model = "x";
  s.port = 8000;
  TrtllmOptions& o = s.trtllm;
  o.tp_size = 8;
  o.pp_size = 1;
  o.ep_size = 8;
  o.backend = "pytorch";
  o.trust_remote_code = true;
  o.max_seq_len = 32768;
  o.extra_llm_api_options = "/etc/berth/trt.yaml";
  std::vector<std::string> argv = ServiceArgv(s, Ctx("trtllm-serve"));
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(argv[1], "serve");  // the subcommand, then the positional MODEL
  ExpectRenderedFlagsKnown(CatalogueEngine::kTrtllm, s, Ctx("trtllm-serve"));
  const EngineCatalogue& trt = Catalogue(CatalogueEngine::kTrtllm);
  for (const OwnedFlag& f : AdapterFor(EngineKind::kTrtllm).OwnedFlags(s))
    EXPECT_NE(trt.Find(f.spellings[0]), nullptr) << f.spellings[0];
}

}  // namespace
}  // namespace berth
