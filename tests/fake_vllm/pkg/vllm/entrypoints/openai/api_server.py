"""validate_api_server_args, as vllm/entrypoints/openai/api_server.py names it."""

from vllm import _fake_rules


def validate_api_server_args(args):
    _fake_rules.validate_api_server_args(args)
