"""What the fake vLLM refuses, with vLLM's own wording; the fake package's functions and
fake_vllm.py's `serve` both apply it, so that a configuration the engine check refuses also
kills the fake server at its start, as it kills the real one.

The tables (architectures, tool-call and reasoning parsers, speculative methods, the config.json
model types and architectures for which method "mtp" is accepted) come from planners/servers/catalogue/vllm.json,
berth's catalogue of vLLM, when it is there; else from the small sets below, copied from vLLM's
source at commit 005223338608bc94fd165a4f976c102a57bd1fc4: mtp_model_types from
SpeculativeConfig.hf_config_override (vllm/config/speculative.py: the model types, and the
architectures, it maps to an MTP model), tool-call parsers from vLLM 0.12's registry (vllm/tool_parsers), reasoning parsers
from vllm/reasoning, architectures a few of vllm/model_executor/models/registry.py's.

Wording, from the same sources:
  vllm/config/speculative.py SpeculativeConfig.__post_init__:
      NotImplementedError("Unsupported speculative method: '<method>'")
  vllm/entrypoints/openai/api_server.py validate_api_server_args:
      KeyError("invalid tool call parser: <p> (chose from { <a,b,...> })")
      KeyError("invalid reasoning parser: <p> (chose from { <a,b,...> })")
  vllm/entrypoints/openai/cli_args.py validate_parsed_serve_args:
      TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")
  vllm/model_executor/models/registry.py _raise_for_unsupported:
      ValueError("Model architectures [...] are not supported for now. Supported
      architectures: ...")
"""

import json
import os

CATALOGUE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                          "..", "..", "planners", "servers", "catalogue",
                                          "vllm.json"))

# True in fake_vllm.py's `serve` (the server), False in berth's engine check.
SERVING = False

FALLBACK = {
    "architectures": ["LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                      "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "DeepseekV3ForCausalLM",
                      "MiniMaxM2ForCausalLM", "Glm4MoeForCausalLM", "GptOssForCausalLM"],
    "tool_call_parsers": ["deepseek_v3", "deepseek_v31", "ernie45", "glm45", "granite",
                          "granite-20b-fc", "hermes", "hunyuan_a13b", "internlm", "jamba",
                          "kimi_k2", "llama3_json", "llama4_json", "llama4_pythonic", "longcat",
                          "minimax", "minimax_m2", "mistral", "olmo3", "openai",
                          "phi4_mini_json", "pythonic", "qwen3_coder", "qwen3_xml", "seed_oss",
                          "step3", "xlam"],
    "reasoning_parsers": ["deepseek_r1", "deepseek_v3", "glm45", "granite", "hunyuan_a13b",
                          "minimax_m2", "minimax_m2_append_think", "mistral", "openai_gptoss",
                          "qwen3", "seed_oss", "step3"],
    "speculative_methods": ["ngram", "eagle", "eagle3", "medusa", "mlp_speculator",
                            "draft_model", "deepseek_mtp", "mtp", "suffix"],
    "mtp_architectures": ["MiMoForCausalLM", "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM",
                          "GlmOcrForConditionalGeneration"],
    "mtp_model_types": ["deepseek_v3", "deepseek_v32", "glm_moe_dsa", "deepseek_mtp",
                        "pangu_ultra_moe", "mimo", "glm4_moe", "glm4_moe_lite", "ernie4_5_moe",
                        "qwen3_next", "exaone_moe", "qwen3_5", "qwen3_5_moe", "longcat_flash",
                        "step3p5"],
}


def tables():
    try:
        with open(CATALOGUE, encoding="utf-8") as f:
            found = json.load(f).get("tables", {})
    except (OSError, ValueError):
        found = {}
    return {k: list(found.get(k) or v) for k, v in FALLBACK.items()}


def validate_serve_args(args):
    if args.enable_auto_tool_choice and not args.tool_call_parser:
        raise TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")


def validate_api_server_args(args):
    t = tables()
    if args.enable_auto_tool_choice and args.tool_call_parser not in t["tool_call_parsers"]:
        raise KeyError("invalid tool call parser: %s (chose from { %s })"
                       % (args.tool_call_parser, ",".join(t["tool_call_parsers"])))
    if args.reasoning_parser and args.reasoning_parser not in t["reasoning_parsers"]:
        raise KeyError("invalid reasoning parser: %s (chose from { %s })"
                       % (args.reasoning_parser, ",".join(t["reasoning_parsers"])))


def model_config(model):
    path = os.path.join(model, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError("Invalid repository ID or local directory specified: '%s' (%s)"
                         % (model, e))
    if not isinstance(config, dict):
        raise ValueError("%s is not a JSON object" % path)
    return config


def create_engine_config(engine_args):
    t = tables()
    config = model_config(engine_args.model)
    archs = config.get("architectures") or []
    if not any(a in t["architectures"] for a in archs):
        raise ValueError("Model architectures %r are not supported for now. Supported "
                         "architectures: %s" % (list(archs), ", ".join(t["architectures"])))
    spec = engine_args.speculative_config
    if spec is not None:
        if not isinstance(spec, dict):
            raise ValueError("speculative_config must be a JSON object")
        method = spec.get("method")
        if method is not None and method not in t["speculative_methods"]:
            raise ValueError("1 validation error for SpeculativeConfig method: Input should be "
                             "one of %s, got %r" % (", ".join(t["speculative_methods"]), method))
        if (method == "mtp" and config.get("model_type") not in t["mtp_model_types"]
                and not any(a in t["mtp_architectures"] for a in archs[:1])):
            raise NotImplementedError("Unsupported speculative method: '%s'" % method)
    return {"model": engine_args.model, "architectures": archs}


def serve_check(argv):
    """What `vllm serve ARGV` checks before its engine starts (raises as vLLM does)."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.entrypoints.openai.api_server import validate_api_server_args as api_check
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    parser = FlexibleArgumentParser(prog="vllm")
    serve = parser.add_subparsers(dest="subparser").add_parser("serve")
    make_arg_parser(serve)
    args = parser.parse_args(argv)
    validate_parsed_serve_args(args)
    if args.model_tag is not None:
        args.model = args.model_tag
    api_check(args)
    EngineArgs.from_cli_args(args).create_engine_config()
