#!/usr/bin/python3
"""Unit tests of tests/tools/engine_catalogue.py on small synthetic engine sources written in the
engines' own shapes, so that a change to one of the parsers is caught without the real sources."""

import json
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import engine_catalogue as ec  # noqa: E402
import llama_server_help_check as hc  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def write_tree(root, files):
    for rel, text in files.items():
        path = Path(root) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


VLLM = {
    "vllm/engine/arg_utils.py": """
        @dataclass
        class EngineArgs:
            trust_remote_code: bool = ModelConfig.trust_remote_code
            kv_cache_dtype: CacheDType = CacheConfig.cache_dtype
            tensor_parallel_size: int = ParallelConfig.tensor_parallel_size
            tokenizer_mode: TokenizerMode | str = ModelConfig.tokenizer_mode
            block_size: BlockSize | None = CacheConfig.block_size
            io_processor_plugin: str | None = None

            @staticmethod
            def add_cli_args(parser):
                model_kwargs = get_kwargs(ModelConfig)
                group = parser.add_argument_group(title="ModelConfig")
                group.add_argument("--trust-remote-code", **model_kwargs["trust_remote_code"])
                group.add_argument("--tokenizer-mode", **model_kwargs["tokenizer_mode"])
                group.add_argument("--task", **model_kwargs["io_processor_plugin"], deprecated=True)
                cache_kwargs = get_kwargs(CacheConfig)
                group.add_argument("--kv-cache-dtype", **cache_kwargs["cache_dtype"])
                group.add_argument("--block-size", **cache_kwargs["block_size"])
                parallel_kwargs = get_kwargs(ParallelConfig)
                group.add_argument("--tensor-parallel-size", "-tp", **parallel_kwargs["tensor_parallel_size"])
                group.add_argument(
                    "--reasoning-parser",
                    choices=list(ReasoningParserManager.reasoning_parsers),
                    type=str,
                )
                for arg, type in [("--old-a", str), ("--old-b", bool)]:
                    group.add_argument(arg, type=type, help=f"[DEPRECATED] {arg} goes.", deprecated=True)
                parser.add_argument("--disable-log-stats", action="store_true", help="No stats.")
                return parser


        @dataclass
        class AsyncEngineArgs(EngineArgs):
            @staticmethod
            def add_cli_args(parser):
                parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction)
                return parser
    """,
    "vllm/entrypoints/openai/cli_args.py": """
        @dataclass
        class FrontendArgs:
            host: str | None = None
            \"\"\"Host name.\"\"\"
            port: int = 8000
            \"\"\"Port number. Second sentence.\"\"\"
            enable_auto_tool_choice: bool = False
            \"\"\"Enable auto tool choice.\"\"\"
            uvicorn_log_level: Literal["info", "debug"] = "info"
            \"\"\"Log level.\"\"\"

            @staticmethod
            def add_cli_args(parser):
                frontend_kwargs = get_kwargs(FrontendArgs)
                for key, value in frontend_kwargs.items():
                    parser.add_argument(f"--{key.replace('_', '-')}", **value)
                return parser


        def make_arg_parser(parser):
            parser.add_argument("model_tag", type=str, nargs="?")
            parser.add_argument("--headless", action="store_true")
            parser.add_argument("--api-server-count", "-asc", type=int)
            return parser
    """,
    "vllm/config/cache.py": """
        BlockSize = Literal[16, 32, 8]
        CacheDType = Literal["auto", "fp8", "fp8_e4m3"]

        @dataclass
        class CacheConfig:
            cache_dtype: CacheDType = "auto"
            \"\"\"Data type for kv cache storage.\"\"\"
    """,
    "vllm/config/speculative.py": """
        MTPModelTypes = Literal["deepseek_mtp", "mimo_mtp", "mtp"]
        EagleModelTypes = Literal["eagle", MTPModelTypes]
        SpeculativeMethod = Literal["ngram", EagleModelTypes]

        class SpeculativeConfig:
            @staticmethod
            def hf_config_override(hf_config):
                if hf_config.model_type in ("deepseek_v3", "deepseek_v32"):
                    hf_config.model_type = "deepseek_mtp"
                if hf_config.model_type == "deepseek_mtp":
                    hf_config.update({"n_predict": 1})
                if hf_config.architectures[0] == "MiMoForCausalLM":
                    hf_config.model_type = "mimo_mtp"
                if hf_config.model_type == "llama":
                    hf_config.model_type = "not_an_mtp_type"
                return hf_config
    """,
    "vllm/model_executor/models/registry.py": """
        _TEXT_GENERATION_MODELS = {
            "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
            "MiniMaxM2ForCausalLM": ("minimax_m2", "MiniMaxM2ForCausalLM"),
        }
        _EMBEDDING_MODELS = {
            "BertModel": ("bert", "BertEmbeddingModel"),
            **{k: v for k, v in _TEXT_GENERATION_MODELS.items()},
        }
    """,
    "vllm/entrypoints/openai/tool_parsers/__init__.py": """
        _TOOL_PARSERS_TO_REGISTER = {"hermes": ("hermes_tool_parser", "Hermes2ProToolParser")}

        @ToolParserManager.register_module(["minimax_m2", "mm2"])
        class X:
            pass
    """,
    "vllm/reasoning/__init__.py": """
        _REASONING_PARSERS_TO_REGISTER = {
            "minimax_m2_append_think": ("minimax_m2_reasoning_parser", "A"),
            "qwen3": ("qwen3_reasoning_parser", "B"),
        }
    """,
}

SGLANG = {
    "python/sglang/srt/server_args.py": """
        QUANT_CHOICES = ["fp8", "awq"]
        MORE = QUANT_CHOICES

        @dataclasses.dataclass
        class ServerArgs:
            model_path: A[str, Arg(help="Model path. More.", aliases=["--model"]), NS("model")]
            tp_size: A[int, Arg(help="TP size.", aliases=["--tensor-parallel-size"]), NS("p")] = 1
            trust_remote_code: A[bool, "Trust remote code.", NS("model")] = False
            enable_x: A[Optional[bool], "Optional bool is still store_true."] = None
            quantization: A[Optional[str], Arg(help="Q.", choices=MORE)] = None
            mode: A[Literal["a", "b"], "Mode."] = "a"
            both: A[Optional[bool], Arg(help="B.", action=argparse.BooleanOptionalAction)] = None
            ep_join_mode: A[Optional[str], Arg(help="J.", cli_name="--elastic-ep-join-mode")] = None
            hidden: A[bool, Arg(no_cli=True)] = False
            reasoning_parser: A[Optional[str], NS("serving")] = None
            grpc_mode: A[bool, "(Deprecated, use --smg-grpc-mode) Old."] = False
            kv_cache_dtype: A[str, Arg(help="KV.", choices=["auto", "fp8_e4m3"])] = "auto"
            speculative_algorithm: A[Optional[str], "Algo. Builtins: EAGLE, NEXTN. Or more."] = None

            @staticmethod
            def add_cli_args(parser):
                add_cli_args_from_dataclass(parser, ServerArgs)
                reasoning_parser_choices = list(ReasoningParser.DetectorMap.keys())
                parser.add_argument(
                    "--reasoning-parser", type=str, choices=["auto"] + reasoning_parser_choices
                )
                parser.add_argument(
                    "--old-flag", action=DeprecatedStoreTrueAction, new_flag="--new", help="Old."
                )
                parser.add_argument(
                    "--old-alias", type=int, action=DeprecatedAliasStoreAction, help="Alias."
                )
    """,
    "python/sglang/cli/main.py": """
        def main():
            serve_parser = subparsers.add_parser("serve", help="Launch.")
    """,
    "python/sglang/srt/function_call/function_call_parser.py": """
        class FunctionCallParser:
            ToolCallParserEnum: Dict[str, Type[BaseFormatDetector]] = {"minimax-m2": D, "qwen": E}
    """,
    "python/sglang/srt/parser/reasoning_parser.py": """
        class ReasoningParser:
            DetectorMap: Dict[str, Type[X]] = {"minimax-append-think": A, "qwen3": B}
    """,
}

LLAMA = {
    "common/arg.cpp": r"""
        static std::initializer_list<enum llama_example> mmproj_examples = {
            LLAMA_EXAMPLE_MTMD,
            LLAMA_EXAMPLE_SERVER,
        };
        static void parse_tensor_buffer_overrides(const std::string & value, std::vector<llama_model_tensor_buft_override> & overrides) {
            for (const auto & override : string_split<std::string>(value, ',')) {
                overrides.push_back({strdup(override.c_str()), nullptr});
            }
        }
        const std::vector<ggml_type> kv_cache_types = {
            GGML_TYPE_F16,
            GGML_TYPE_Q8_0,
            GGML_TYPE_IQ4_NL,
        };
        common_params_context common_params_parser_init(common_params & params, llama_example ex) {
            add_opt(common_arg(
                {"-ngl", "--gpu-layers", "--n-gpu-layers"}, "N",
                string_format("max. number of layers (default: %d)", params.n_gpu_layers),
                [](common_params & params, int value) { params.n_gpu_layers = value; }
            ).set_env("LLAMA_ARG_N_GPU_LAYERS"));
            add_opt(common_arg(
                {"-sm", "--split-mode"}, "{none,layer,row}",
                "how to split, one of:\n- none: \"one\" GPU (a, b)",
                [](common_params & params, const std::string & value) { /* ) } ] */ }
            ));
            add_opt(common_arg(
                {"--jinja"},
                {"--no-jinja"},
                string_format("whether to use jinja (default: %s)", params.use_jinja ? "on" : "off"),
                [](common_params & params, bool value) { params.use_jinja = value; }
            ).set_examples({LLAMA_EXAMPLE_SERVER, LLAMA_EXAMPLE_CLI}));
            add_opt(common_arg(
                {"-p", "--prompt"}, "PROMPT",
                "prompt",
                [](common_params & params, const std::string & value) { params.prompt = value; }
            ).set_excludes({LLAMA_EXAMPLE_SERVER}));
            add_opt(common_arg(
                {"-ns", "--sequences"}, "N",
                "sequences",
                [](common_params & params, int value) { params.n_sequences = value; }
            ).set_examples({LLAMA_EXAMPLE_PARALLEL}));
            add_opt(common_arg(
                {"-mm", "--mmproj"}, "FILE",
                "projector",
                [](common_params & params, const std::string & value) { params.mmproj.path = value; }
            ).set_examples(mmproj_examples));
            add_opt(common_arg(
                {"-ctk", "--cache-type-k"}, "TYPE",
                string_format("KV cache data type for K\nallowed values: %s\n", get_all_kv_cache_types().c_str()),
                [](common_params & params, const std::string & value) { }
            ));
            add_opt(common_arg(
                {"-fa", "--flash-attn"}, "[on|off|auto]",
                "set Flash Attention use",
                [](common_params & params, const std::string & value) { }
            ));
            add_opt(common_arg(
                {"-dt", "--defrag-thold"}, "N",
                string_format("KV cache defragmentation threshold (DEPRECATED)"),
                [](common_params & params, const std::string & value) { }
            ));
            add_opt(common_arg(
                {"--metrics"},
                R"(enable "metrics" endpoint)",
                [](common_params & params) { params.endpoint_metrics = true; }
            ).set_examples({LLAMA_EXAMPLE_SERVER}));
            if (ex == LLAMA_EXAMPLE_SERVER) {
                add_opt(common_arg(
                    {"-np", "--parallel"}, "N",
                    "number of server slots",
                    [](common_params & params, int value) { params.n_parallel = value; }
                ).set_env("LLAMA_ARG_N_PARALLEL").set_examples({LLAMA_EXAMPLE_SERVER}));
            } else {
                add_opt(common_arg(
                    {"-np", "--parallel"}, "N",
                    "number of parallel sequences",
                    [](common_params & params, int value) { params.n_parallel = value; }
                ).set_env("LLAMA_ARG_N_PARALLEL"));
            }
            if (params.is_gen_docs || llama_supports_rpc()) {
                add_opt(common_arg(
                    {"--rpc"}, "SERVERS",
                    "comma-separated list of RPC servers",
                    [](common_params & params, const std::string & value) { add_rpc_devices(value); }
                ).set_env("LLAMA_ARG_RPC"));
            }
            add_opt(common_arg(
                // a comment before the names
                {"-ot", "--override-tensor"}, "<tensor name pattern>=<buffer type>,...",
                "override tensor buffer type", [](common_params & params, const std::string & value) {
                    parse_tensor_buffer_overrides(value, params.tensor_buft_overrides);
                }
            ).set_env("LLAMA_ARG_OVERRIDE_TENSOR"));
            add_opt(common_arg(
                {"--api-key"}, "KEY",
                "API key",
                [](common_params & params, const std::string & value) { params.api_keys.push_back(value); }
            ).set_examples({LLAMA_EXAMPLE_SERVER}).set_env("LLAMA_API_KEY"));
            add_opt(common_arg(
                {"--dry-sequence-breaker"}, "STRING",
                "add sequence breaker",
                [](common_params & params, const std::string & value) {
                    params.sampling.dry_sequence_breakers.clear();
                    params.sampling.dry_sequence_breakers.emplace_back(value);
                }
            ).set_sampling());
            add_opt(common_arg(
                {"--control-vector-layer-range"}, "START", "END",
                "layer range to apply the control vector(s) to",
                [](common_params & params, const std::string & start, const std::string & end) { }
            ));
            add_opt(common_arg(
                {"-fitp", "--fit-print"}, "[on|off]",
                "print the estimated required memory",
                [](common_params & params, const std::string & value) { }
            ).set_examples({LLAMA_EXAMPLE_FIT_PARAMS}).set_env("LLAMA_ARG_FIT_ESTIMATE"));
        }
    """,
    "tools/server/server.cpp": """
        int main(int argc, char ** argv) {
            if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_SERVER)) { return 1; }
        }
    """,
    "tools/fit-params/fit-params.cpp": """
        int main(int argc, char ** argv) {
            if (!common_params_parse(argc, argv, params, LLAMA_EXAMPLE_FIT_PARAMS)) { return 1; }
        }
    """,
}

TRTLLM = {
    "tensorrt_llm/commands/serve.py": """
        @click.command("serve")
        @click.argument("model", type=str)
        @click.option("--tp_size", type=int, default=1, help="Tensor parallelism size.")
        @click.option("--backend", type=ChoiceWithAlias(["pytorch", "tensorrt"], {"trt": "tensorrt"}))
        @click.option("--trust_remote_code", is_flag=True, default=False, help="Flag.")
        @click.option("--log_level", type=click.Choice(["info", "debug"]), help="Deprecated soon.")
        def serve(model, tp_size, backend, trust_remote_code, log_level):
            pass
    """,
}


class Generator(unittest.TestCase):
    def build(self, engine, files):
        with tempfile.TemporaryDirectory() as tmp:
            write_tree(tmp, files)
            return ec.build(engine, tmp, "vTEST", COMMIT)

    def test_vllm_flags_follow_get_kwargs_and_argparse(self):
        cat = self.build("vllm", VLLM)
        f = cat["flags"]
        self.assertEqual(cat["commit"], COMMIT)
        self.assertEqual(cat["sources"], ec.SOURCES["vllm"])
        # bool config field -> BooleanOptionalAction: no value, a --no- form.
        self.assertFalse(f["--trust-remote-code"]["takes_value"])
        self.assertEqual(f["--trust-remote-code"]["aliases"], ["--no-trust-remote-code"])
        # Literal alias -> sorted choices; with str in the union only a metavar.
        self.assertEqual(f["--kv-cache-dtype"]["choices"], ["auto", "fp8", "fp8_e4m3"])
        self.assertEqual(f["--kv-cache-dtype"]["help"], "Data type for kv cache storage.")
        self.assertIsNone(f["--tokenizer-mode"]["choices"])
        # Optional Literal adds "None"; ints sort as strings, as vLLM's sorted() on str values.
        self.assertEqual(f["--block-size"]["choices"], ["16", "32", "8", "None"])
        self.assertEqual(f["--tensor-parallel-size"]["aliases"], ["-tp"])
        self.assertTrue(f["--task"]["deprecated"])
        self.assertEqual(
            f["--reasoning-parser"]["choices"], ["minimax_m2_append_think", "qwen3"]
        )
        # the for-loop of deprecated flags, with type=bool still taking a value
        self.assertTrue(f["--old-a"]["deprecated"])
        self.assertTrue(f["--old-b"]["takes_value"])
        self.assertFalse(f["--disable-log-stats"]["takes_value"])
        self.assertEqual(f["--enable-log-requests"]["aliases"], ["--no-enable-log-requests"])
        # FrontendArgs: one flag per field, "--" + name with "_" -> "-"; docstring's first sentence.
        self.assertEqual(f["--port"]["help"], "Port number.")
        self.assertTrue(f["--host"]["takes_value"])
        self.assertFalse(f["--enable-auto-tool-choice"]["takes_value"])
        self.assertEqual(f["--uvicorn-log-level"]["choices"], ["debug", "info"])
        self.assertEqual(f["--api-server-count"]["aliases"], ["-asc"])
        self.assertNotIn("model_tag", f)

    def test_vllm_tables(self):
        t = self.build("vllm", VLLM)["tables"]
        self.assertEqual(t["architectures"], ["BertModel", "LlamaForCausalLM", "MiniMaxM2ForCausalLM"])
        self.assertEqual(t["tool_call_parsers"], ["hermes", "minimax_m2", "mm2"])
        self.assertEqual(t["speculative_methods"], ["ngram", "eagle", "deepseek_mtp", "mimo_mtp", "mtp"])
        self.assertEqual(t["mtp_model_types"], ["deepseek_v3", "deepseek_v32"])
        self.assertEqual(t["mtp_architectures"], ["MiMoForCausalLM"])
        self.assertEqual(t["kv_cache_dtypes"], ["auto", "fp8", "fp8_e4m3"])

    def test_sglang_dataclass_rule_and_manual_flags(self):
        cat = self.build("sglang", SGLANG)
        f, t = cat["flags"], cat["tables"]
        self.assertEqual(f["--model-path"]["aliases"], ["--model"])
        self.assertEqual(f["--model-path"]["help"], "Model path.")
        self.assertEqual(f["--tp-size"]["aliases"], ["--tensor-parallel-size"])
        self.assertFalse(f["--trust-remote-code"]["takes_value"])
        self.assertFalse(f["--enable-x"]["takes_value"])
        self.assertEqual(f["--quantization"]["choices"], ["fp8", "awq"])
        self.assertEqual(f["--mode"]["choices"], ["a", "b"])
        self.assertEqual(f["--both"]["aliases"], ["--no-both"])
        self.assertIn("--elastic-ep-join-mode", f)
        self.assertNotIn("--ep-join-mode", f)
        self.assertNotIn("--hidden", f)
        self.assertTrue(f["--grpc-mode"]["deprecated"])
        self.assertEqual(f["--reasoning-parser"]["choices"], ["auto", "minimax-append-think", "qwen3"])
        self.assertFalse(f["--old-flag"]["takes_value"])
        self.assertTrue(f["--old-flag"]["deprecated"])
        self.assertTrue(f["--old-alias"]["takes_value"])
        self.assertEqual(t["tool_call_parsers"], ["minimax-m2", "qwen"])
        self.assertEqual(t["speculative_methods"], ["EAGLE", "NEXTN"])
        self.assertEqual(t["kv_cache_dtypes"], ["auto", "fp8_e4m3"])
        self.assertEqual(t["subcommands"], ["serve"])

    def test_llama_server_keeps_only_what_llama_server_accepts(self):
        cat = self.build("llama_server", LLAMA)
        f = cat["flags"]
        self.assertEqual(
            sorted(f),
            ["--api-key", "--cache-type-k", "--control-vector-layer-range", "--defrag-thold",
             "--dry-sequence-breaker", "--flash-attn", "--gpu-layers", "--jinja", "--metrics",
             "--mmproj", "--override-tensor", "--parallel", "--rpc", "--split-mode"],
        )
        self.assertEqual(f["--gpu-layers"]["aliases"], ["-ngl", "--n-gpu-layers"])
        self.assertTrue(f["--gpu-layers"]["takes_value"])
        self.assertEqual(f["--split-mode"]["choices"], ["none", "layer", "row"])
        self.assertEqual(f["--flash-attn"]["choices"], ["on", "off", "auto"])
        self.assertFalse(f["--jinja"]["takes_value"])
        self.assertEqual(f["--jinja"]["aliases"], ["--no-jinja"])
        self.assertFalse(f["--metrics"]["takes_value"])
        self.assertEqual(f["--cache-type-k"]["choices"], ["f16", "q8_0", "iq4_nl"])
        self.assertTrue(f["--defrag-thold"]["deprecated"])
        self.assertEqual(cat["tables"]["kv_cache_dtypes"], ["f16", "q8_0", "iq4_nl"])
        self.assertEqual(f["--override-tensor"]["aliases"], ["-ot"])  # a comment before the names

    def test_llama_server_values_env_and_negative_forms(self):
        f = self.build("llama_server", LLAMA)["flags"]
        self.assertEqual(f["--gpu-layers"]["env"], "LLAMA_ARG_N_GPU_LAYERS")
        self.assertEqual(f["--api-key"]["env"], "LLAMA_API_KEY")
        self.assertIsNone(f["--split-mode"]["env"])
        self.assertEqual([f[n]["values"] for n in ("--metrics", "--jinja", "--gpu-layers",
                                                   "--control-vector-layer-range")], [0, 0, 1, 2])
        self.assertTrue(f["--control-vector-layer-range"]["takes_value"])
        self.assertTrue(f["--jinja"]["negatable"])
        self.assertEqual(f["--jinja"]["negative_aliases"], ["--no-jinja"])
        self.assertFalse(f["--metrics"]["negatable"])

    def test_llama_server_repeatable_when_the_handler_appends(self):
        f = self.build("llama_server", LLAMA)["flags"]
        self.assertTrue(f["--api-key"]["repeatable"])  # push_back in the handler
        self.assertTrue(f["--override-tensor"]["repeatable"])  # through a helper that appends
        self.assertFalse(f["--dry-sequence-breaker"]["repeatable"])  # clears first
        self.assertFalse(f["--gpu-layers"]["repeatable"])

    def test_llama_server_fit_params_and_conditional_entries(self):
        f = self.build("llama_server", LLAMA)["flags"]
        # The -np of `if (ex == LLAMA_EXAMPLE_SERVER)` for llama-server, the else one for
        # llama-fit-params: both accept it.
        self.assertEqual(f["--parallel"]["help"], "number of server slots")
        self.assertTrue(f["--parallel"]["fit_params"])
        self.assertTrue(f["--gpu-layers"]["fit_params"])
        self.assertFalse(f["--api-key"]["fit_params"])  # LLAMA_EXAMPLE_SERVER only
        self.assertFalse(f["--mmproj"]["fit_params"])  # mmproj_examples lacks FIT_PARAMS
        self.assertNotIn("--fit-print", f)  # llama-fit-params only
        self.assertEqual(f["--rpc"]["only_if"], "params.is_gen_docs || llama_supports_rpc()")
        self.assertIsNone(f["--gpu-layers"]["only_if"])

    def test_llama_server_add_opt_where_it_is_not_read_is_an_error(self):
        hidden = dict(LLAMA)
        hidden["common/arg.cpp"] = LLAMA["common/arg.cpp"].replace(
            "if (params.is_gen_docs || llama_supports_rpc())", "for (int i = 0; i < 2; i++)")
        with self.assertRaisesRegex(ec.CatalogueError, r"common/arg.cpp:\d+: add_opt inside a statement"):
            self.build("llama_server", hidden)

    def test_trtllm_click_options(self):
        f = self.build("trtllm", TRTLLM)["flags"]
        self.assertEqual(sorted(f), ["--backend", "--log_level", "--tp_size", "--trust_remote_code"])
        self.assertEqual(f["--backend"]["choices"], ["pytorch", "tensorrt", "trt"])
        self.assertFalse(f["--trust_remote_code"]["takes_value"])
        self.assertTrue(f["--log_level"]["deprecated"])

    def test_missing_or_broken_source_is_an_error_naming_the_file(self):
        broken = dict(VLLM)
        broken["vllm/config/cache.py"] = "CacheDType = Literal[\n"
        with self.assertRaisesRegex(ec.CatalogueError, r"vllm/config/cache.py:\d+: not Python"):
            self.build("vllm", broken)
        missing = dict(SGLANG)
        del missing["python/sglang/cli/main.py"]
        with self.assertRaisesRegex(ec.CatalogueError, "python/sglang/cli/main.py"):
            self.build("sglang", missing)
        with self.assertRaisesRegex(ec.CatalogueError, "40-hex"):
            with tempfile.TemporaryDirectory() as tmp:
                write_tree(tmp, TRTLLM)
                ec.build("trtllm", tmp, "v", "abc")

    def test_command_line_writes_the_catalogue_shape(self):
        with tempfile.TemporaryDirectory() as tmp:
            write_tree(tmp, TRTLLM)
            out = Path(tmp) / "trtllm.json"
            subprocess.run(
                [sys.executable, str(HERE / "engine_catalogue.py"), "trtllm", "--src", tmp,
                 "--release", "v1", "--commit", COMMIT, "-o", str(out)],
                check=True, capture_output=True,
            )
            cat = json.loads(out.read_text())
            self.assertEqual(
                list(cat), ["engine", "release", "commit", "generated_by", "sources", "flags", "tables"]
            )
            self.assertEqual(
                list(cat["flags"]["--tp_size"]), ["aliases", "takes_value", "choices", "deprecated", "help"]
            )


class HelpCheck(unittest.TestCase):
    """llama_server_help_check.py: common_arg::to_string()'s layout read back, and each kind of
    difference between a catalogue and that help named."""

    HELP = (
        "----- common params -----\n\n"
        "-c,    --ctx-size N                     size of the prompt context\n"
        "                                        (env: LLAMA_ARG_CTX_SIZE)\n"
        "--jinja, --no-jinja                     whether to use jinja\n"
        "-ot,   --override-tensor <tensor name pattern>=<buffer type>,...\n"
        "                                        override tensor buffer type\n"
        "                                        (env: LLAMA_ARG_OVERRIDE_TENSOR)\n"
    )

    def catalogue(self):
        def flag(aliases, takes_value, env, fit=True, only_if=None):
            return {"aliases": aliases, "takes_value": takes_value, "env": env,
                    "fit_params": fit, "only_if": only_if}
        return {"flags": {
            "--ctx-size": flag(["-c"], True, "LLAMA_ARG_CTX_SIZE"),
            "--jinja": flag(["--no-jinja"], False, None, fit=False),
            "--override-tensor": flag(["-ot"], True, "LLAMA_ARG_OVERRIDE_TENSOR"),
            "--rpc": flag([], True, "LLAMA_ARG_RPC", only_if="llama_supports_rpc()"),
        }}

    def test_help_layout(self):
        opts = hc.parse_help(self.HELP)
        self.assertEqual([o["names"] for o in opts],
                         [["-c", "--ctx-size"], ["--jinja", "--no-jinja"], ["-ot", "--override-tensor"]])
        self.assertEqual([o["takes_value"] for o in opts], [True, False, True])
        self.assertEqual([o["env"] for o in opts],
                         ["LLAMA_ARG_CTX_SIZE", None, "LLAMA_ARG_OVERRIDE_TENSOR"])

    def test_agreeing_catalogue_and_each_difference(self):
        server = hc.parse_help(self.HELP)
        fit = hc.parse_help(self.HELP.replace("--jinja, --no-jinja", "--other"))
        self.assertEqual(hc.compare(self.catalogue(), server, fit), [])
        cat = self.catalogue()
        del cat["flags"]["--jinja"]
        cat["flags"]["--ctx-size"]["env"] = "LLAMA_ARG_CTX"
        cat["flags"]["--override-tensor"]["aliases"] = []
        cat["flags"]["--gone"] = {"aliases": [], "takes_value": False, "env": None}
        self.assertEqual(hc.compare(cat, server, fit), [
            "--ctx-size: --help says env LLAMA_ARG_CTX_SIZE, the catalogue LLAMA_ARG_CTX",
            "llama-server --help prints --jinja --no-jinja: not one catalogue flag (no --jinja, --no-jinja)",
            "llama-server --help prints -ot --override-tensor: not one catalogue flag (no -ot)",
            "--gone: in the catalogue, not in llama-server --help",
        ])
        cat = self.catalogue()
        cat["flags"]["--jinja"]["fit_params"] = True
        self.assertEqual(hc.compare(cat, server, fit),
                         ["--jinja: llama-fit-params --help lacks it, the catalogue fit_params=True"])


class CheckedInCatalogues(unittest.TestCase):
    """The catalogues berth embeds are in the generator's shape (they are regenerated, not edited)."""

    def test_each_catalogue_has_the_shape_and_a_commit(self):
        root = HERE.parent.parent / "planners" / "servers" / "catalogue"
        for engine in ec.SOURCES:
            with self.subTest(engine=engine):
                cat = json.loads((root / f"{engine}.json").read_text())
                self.assertEqual(cat["engine"], engine)
                self.assertRegex(cat["commit"], r"^[0-9a-f]{40}$")
                self.assertEqual(cat["sources"], ec.SOURCES[engine])
                self.assertTrue(cat["generated_by"].startswith("tests/tools/engine_catalogue.py " + engine))
                self.assertGreater(len(cat["flags"]), 10)
                self.assertEqual(list(cat["flags"]), sorted(cat["flags"]))


if __name__ == "__main__":
    unittest.main()
