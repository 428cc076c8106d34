#!/usr/bin/python3
"""The llama_server flag catalogue against the built binaries it describes.

    llama_server_help_check.py LLAMA_SERVER CATALOGUE_JSON

Runs `llama-server --help` and `llama-fit-params --help` (the one next to llama-server) and
compares what they print with the catalogue, both ways: every flag the help prints is in the
catalogue with the same aliases, value rule and environment variable, every catalogue flag is in
the help (a flag with "only_if", e.g. --rpc of a build without RPC, may be absent), and
"fit_params" is true exactly for the flags llama-fit-params prints. A difference means the
catalogue was generated from another llama.cpp than the one built: regenerate it
(docs/engines.md). Python 3 standard library only.
"""

import json
import re
import subprocess
import sys
from pathlib import Path

HELP_LIMIT = 1 << 20  # bytes of --help kept; llama-server's is about 60 KB
HELP_COLUMN = 40  # common_arg::to_string() starts the help text at this column


def run_help(binary):
    """The options --help prints: a list of (spellings, takes_value, env or None)."""
    if not Path(binary).exists():
        sys.exit(f"{binary} is missing: .ci/setup --tests builds it (.ci/llama-server)")
    try:
        proc = subprocess.run([binary, "--help"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=30)
    except subprocess.TimeoutExpired:
        sys.exit(f"{binary} --help ran past 30 s")
    out = proc.stdout[:HELP_LIMIT].decode("utf-8", "replace")
    if proc.returncode != 0:
        sys.exit(f"{binary} --help exited {proc.returncode}: {proc.stderr[:2000]!r}")
    return parse_help(out)


def parse_help(text):
    """common_arg::to_string()'s layout: the spellings at column 0, comma-separated, then the
    value hints; the help at column 40 (same line, or the next when the left part is longer),
    "(env: NAME)" on a help line of its own."""
    options = []
    for line in text.splitlines():
        if line.startswith("-") and not line.startswith("-----"):
            left = line[:HELP_COLUMN].rstrip() if line[HELP_COLUMN - 3 : HELP_COLUMN] == "   " else line
            tokens = left.split()
            names = []
            for tok in tokens:
                names.append(tok.rstrip(","))
                if not tok.endswith(","):
                    break
            options.append({"names": names, "takes_value": len(tokens) > len(names), "env": None})
        m = re.fullmatch(r"\s{%d}\(env: (\S+)\)" % HELP_COLUMN, line)
        if m and options:
            options[-1]["env"] = m.group(1)
    return options


def compare(catalogue, server_help, fit_help):
    """The differences, one line each; empty when the catalogue and the binaries agree."""
    flags = catalogue["flags"]
    by_spelling = {}
    for name, f in flags.items():
        for s in [name] + f["aliases"]:
            by_spelling[s] = name
    problems = []
    printed = set()
    for opt in server_help:
        shown = " ".join(opt["names"])
        owners = {by_spelling.get(n) for n in opt["names"]}
        printed.update(o for o in owners if o)
        if None in owners or len(owners) != 1:
            missing = [n for n in opt["names"] if n not in by_spelling]
            problems.append(f"llama-server --help prints {shown}: not one catalogue flag"
                            + (f" (no {', '.join(missing)})" if missing else ""))
            continue
        name = owners.pop()
        f = flags[name]
        if set(opt["names"]) != {name, *f["aliases"]}:
            problems.append(f"{name}: --help prints {shown}, the catalogue {name} "
                            + " ".join(f["aliases"]))
        if opt["takes_value"] != f["takes_value"]:
            problems.append(f"{name}: --help shows {'a' if opt['takes_value'] else 'no'} value, "
                            f"the catalogue takes_value={f['takes_value']}")
        if opt["env"] != f.get("env"):
            problems.append(f"{name}: --help says env {opt['env']}, the catalogue {f.get('env')}")
    for name, f in flags.items():
        if name not in printed and not f.get("only_if"):
            problems.append(f"{name}: in the catalogue, not in llama-server --help")
    fit_spellings = {n for opt in fit_help for n in opt["names"]}
    for name, f in flags.items():
        accepted = name in fit_spellings
        if name in printed and accepted != f.get("fit_params"):
            problems.append(f"{name}: llama-fit-params --help {'prints' if accepted else 'lacks'} "
                            f"it, the catalogue fit_params={f.get('fit_params')}")
    return problems


def main(argv):
    if len(argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    server, catalogue_path = argv
    catalogue = json.loads(Path(catalogue_path).read_text(encoding="utf-8"))
    server_help = run_help(server)
    fit_help = run_help(str(Path(server).with_name("llama-fit-params")))
    problems = compare(catalogue, server_help, fit_help)
    for p in problems:
        print(p)
    print(f"{len(server_help)} options in llama-server --help, {len(catalogue['flags'])} in "
          f"{catalogue_path} (llama.cpp {catalogue['commit'][:7]}): "
          f"{len(problems)} difference(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
