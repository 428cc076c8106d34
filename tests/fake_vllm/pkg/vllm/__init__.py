"""A fake `vllm` package for berth's tests: the module paths and names berth's engine check
(engine/dist/engine-check/vllm_check.py) imports, refusing what the real vLLM refuses before it
creates the engine (see _fake_rules.py). Python 3 standard library only. Tests put
tests/fake_vllm/pkg on the unit's PYTHONPATH (the service's env), as a virtualenv puts the real
one on its interpreter's path."""

__version__ = "0.0.0-fake"
