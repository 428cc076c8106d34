"""sglang_check.py - berth's engine check for SGLang, run before anything goes dark.

berth runs it with the unit's Python (the executable itself when it is python, else the first
line of the `sglang` script), the unit's environment, and the server's arguments (what follows
`-m sglang.launch_server` or `sglang serve`):

  <the unit's python> sglang_check.py --model-path MODEL [SGLang flags ...]

It does what sglang.launch_server does before it starts the server: prepare_server_args(argv)
(python/sglang/srt/server_args.py at SGLang commit 469c63e54e7d94591617ef9590c6aa26d54dc1bb: a
parser with ServerArgs.add_cli_args, then ServerArgs.from_cli_args, whose __post_init__ runs
the server's own checks). It loads no weights and starts no scheduler.

Its last line says the verdict, and its exit status with it:
  berth-engine-check: ok                        exit 0
  berth-engine-check: refused: TYPE: MESSAGE    exit 1 (SGLang's own exception, on one line)
  berth-engine-check: error: MESSAGE            exit 2 (SGLang could not be imported)
"""

import contextlib
import io
import sys

sys.dont_write_bytecode = True  # nothing written into the engine's virtualenv

PREFIX = "berth-engine-check: "
MAX_MESSAGE = 1500


def one_line(text):
    parts = [p.strip() for p in str(text).splitlines() if p.strip()]
    line = " / ".join(parts)
    return line if len(line) <= MAX_MESSAGE else line[:MAX_MESSAGE] + " ..."


def verdict(kind, message, status):
    sys.stdout.flush()
    sys.stderr.flush()
    print(PREFIX + kind + (": " + message if message else ""), flush=True)
    return status


def main(argv):
    try:
        from sglang.srt.server_args import prepare_server_args
    except Exception as e:  # noqa: BLE001 - whatever stops the import stops the server too
        return verdict("error", one_line("this interpreter (%s) cannot import SGLang: %s: %s"
                                         % (sys.executable, type(e).__name__, e)), 2)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            prepare_server_args(argv)
    except SystemExit:  # argparse refused the arguments; its last line says why
        lines = [l for l in captured.getvalue().splitlines() if l.strip()]
        why = lines[-1] if lines else "the sglang parser refused the arguments"
        return verdict("refused", one_line("ArgumentError: " + why), 1)
    except Exception as e:  # noqa: BLE001 - SGLang's own refusal, quoted by berth
        sys.stderr.write(captured.getvalue())
        return verdict("refused", one_line("%s: %s" % (type(e).__name__, e)), 1)
    sys.stderr.write(captured.getvalue())
    return verdict("ok", "", 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
