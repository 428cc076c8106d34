"""FlexibleArgumentParser, as vllm/utils/argparse_utils.py names it. Unlike vLLM's, flags it does
not know are kept aside (parse_known_args), not refused: fake_vllm.py takes test-only flags
(--tokens-per-second, --exit-after-healthy, ...) that the real vLLM has no use for."""

import argparse


class FlexibleArgumentParser(argparse.ArgumentParser):
    def parse_args(self, args=None, namespace=None):
        parsed, unknown = self.parse_known_args(args, namespace)
        parsed.fake_unknown_args = unknown
        return parsed
