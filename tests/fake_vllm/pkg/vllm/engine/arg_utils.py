"""EngineArgs, as vllm/engine/arg_utils.py names it: from_cli_args, then create_engine_config,
which reads the model's config.json like vLLM's ModelConfig (no weights) and refuses an
architecture or a speculative method vLLM refuses (_fake_rules)."""

import json
import os

from vllm import _fake_rules


class EngineArgs:
    def __init__(self, args):
        self.model = args.model or args.model_tag
        self.speculative_config = args.speculative_config
        self.trust_remote_code = args.trust_remote_code
        self.kv_cache_dtype = args.kv_cache_dtype
        self.args = args

    @classmethod
    def from_cli_args(cls, args):
        return cls(args)

    def create_engine_config(self, usage_context=None, headless=False):
        dump = os.environ.get("FAKE_VLLM_ENV_DUMP")
        if dump and not _fake_rules.SERVING:  # what the engine check saw: tests compare it with the unit's
            with open(os.path.join(dump, "check.json"), "w", encoding="utf-8") as f:
                json.dump(dict(os.environ), f, indent=1, sort_keys=True)
        return _fake_rules.create_engine_config(self)


class AsyncEngineArgs(EngineArgs):
    pass
