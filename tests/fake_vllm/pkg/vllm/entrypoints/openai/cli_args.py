"""make_arg_parser and validate_parsed_serve_args, as vllm/entrypoints/openai/cli_args.py names
them: the flags berth renders and those its tests pass."""

import json

from vllm import _fake_rules


def make_arg_parser(parser):
    parser.add_argument("model_tag", type=str, nargs="?")
    parser.add_argument("--model", type=str, default=None)
    parser.add_argument("--served-model-name", nargs="+", default=None)
    parser.add_argument("--host", type=str, default=None)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    parser.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    parser.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    parser.add_argument("--enable-expert-parallel", action="store_true", default=False)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--max-model-len", type=int, default=None)
    parser.add_argument("--trust-remote-code", action="store_true", default=False)
    parser.add_argument("--speculative-config", type=json.loads, default=None)
    parser.add_argument("--kv-cache-dtype", type=str, default="auto")
    parser.add_argument("--enable-auto-tool-choice", action="store_true", default=False)
    parser.add_argument("--tool-call-parser", type=str, default=None)
    parser.add_argument("--tool-parser-plugin", type=str, default="")
    parser.add_argument("--reasoning-parser", type=str, default=None)
    parser.add_argument("--chat-template", type=str, default=None)
    # vllm/engine/arg_utils.py (EngineArgs.enable_sleep_mode): what standby: sleep renders.
    parser.add_argument("--enable-sleep-mode", action="store_true", default=False)
    return parser


def validate_parsed_serve_args(args):
    _fake_rules.validate_serve_args(args)
