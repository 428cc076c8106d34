"""A fake `sglang` package for berth's tests: sglang.srt.server_args.prepare_server_args, which
berth's engine check (engine/dist/engine-check/sglang_check.py) calls, refusing what SGLang's own
parser refuses: a --tool-call-parser or --reasoning-parser outside its choices (argparse's
"invalid choice", the choices from planners/servers/catalogue/sglang.json, else a few copied
from python/sglang/srt/server_args.py at SGLang commit
469c63e54e7d94591617ef9590c6aa26d54dc1bb), and a --mem-fraction-static outside (0, 1)."""
