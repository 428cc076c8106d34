"""prepare_server_args and ServerArgs, as python/sglang/srt/server_args.py names them."""

import argparse
import json
import os

CATALOGUE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                          "..", "..", "..", "planners", "servers", "catalogue",
                                          "sglang.json"))
FALLBACK = {"--tool-call-parser": ["auto", "deepseekv3", "glm45", "llama3", "minimax-m2",
                                   "mistral", "pythonic", "qwen", "qwen25", "qwen3_coder"],
            "--reasoning-parser": ["auto", "deepseek-r1", "glm45", "minimax",
                                   "minimax-append-think", "qwen3", "qwen3-thinking"]}


def choices(flag):
    try:
        with open(CATALOGUE, encoding="utf-8") as f:
            found = json.load(f)["flags"][flag]["choices"]
    except (OSError, ValueError, KeyError, TypeError):
        found = None
    return list(found or FALLBACK[flag])


class ServerArgs:
    def __init__(self, ns):
        self.__dict__.update(vars(ns))
        self.__post_init__()

    def __post_init__(self):
        if not 0 < self.mem_fraction_static < 1:
            raise ValueError("mem_fraction_static must be in (0, 1), got %r"
                             % self.mem_fraction_static)

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str, required=True)
        parser.add_argument("--served-model-name", type=str, default=None)
        parser.add_argument("--host", type=str, default="127.0.0.1")
        parser.add_argument("--port", type=int, default=30000)
        parser.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
        parser.add_argument("--dp-size", "--data-parallel-size", type=int, default=1)
        parser.add_argument("--mem-fraction-static", type=float, default=0.88)
        parser.add_argument("--context-length", type=int, default=None)
        parser.add_argument("--trust-remote-code", action="store_true")
        parser.add_argument("--tool-call-parser", type=str, default=None,
                            choices=choices("--tool-call-parser"))
        parser.add_argument("--reasoning-parser", type=str, default=None,
                            choices=choices("--reasoning-parser"))

    @classmethod
    def from_cli_args(cls, args):
        return cls(args)


def prepare_server_args(argv):
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    args, _unknown = parser.parse_known_args(argv)  # the fake takes test-only flags too
    return ServerArgs.from_cli_args(args)
