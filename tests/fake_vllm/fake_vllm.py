#!/usr/bin/python3
"""fake_vllm.py - a stand-in for `vllm serve`, sglang's launch_server and llama-server in tests.

Python 3 standard library only. Accepts the command lines berth renders:

  fake_vllm.py serve MODEL_DIR [--served-model-name N] [--host H] [--port P]
               [--tensor-parallel-size N] [--pipeline-parallel-size N] [--enable-expert-parallel]
               [--gpu-memory-utilization F] [--max-model-len N] [--data-parallel-size N]
               [--max-num-seqs N] [--speculative-config JSON] [unknown vLLM flags...]
  fake_vllm.py -m sglang.launch_server --model-path MODEL_DIR [--tp-size N]
               [--mem-fraction-static F] [--context-length N] [--host H] [--port P]
  fake_vllm.py --model FILE.gguf|MODEL_DIR [--alias N] [--n-gpu-layers N|auto|all] [--ctx-size N]
               [--host H] [--port P]
  fake_vllm.py serve MODEL_DIR [--host H] [--port P] [--tp_size N] [--pp_size N] [--ep_size N]
               [--max_seq_len N] [--extra_llm_api_options FILE.yaml]     (trtllm-serve)

trtllm-serve has no served-name flag: given its underscore flags (--tp_size, --pp_size, --ep_size,
--max_seq_len, --extra_llm_api_options, --backend), the fake lists a model folder under the
folder's name, as tensorrt_llm/serve/openai_server.py does (`self.model = model_dir.name`), and
an --extra_llm_api_options file that cannot be read is an error at start (trtllm-serve opens it).

Unknown flags are accepted (like argparse's parse_known_args) and listed on stderr.

`serve` checks its arguments as `vllm serve` does before its engine starts, with the fake vllm
package beside it (pkg/vllm, the one berth's engine check imports from the unit's PYTHONPATH in
tests): a speculative method the model's config.json model_type has no MTP for, an unknown
tool-call or reasoning parser, an architecture vLLM does not know. A refusal is logged with
vLLM's own wording and the server exits with status 1 before it listens, as vLLM dies.

  fake_vllm.py --version    prints a version line and exits 0 (llama-server's --version)

At start it reads the model like a real server would: MODEL_DIR/config.json must parse as JSON,
every *.safetensors file must have a valid header (8-byte little-endian length N, then N bytes of
JSON), and model.safetensors.index.json (if present) must parse and name shards that exist. A
model given as a file must be a GGUF file (starts with b"GGUF"). Symlinks are followed (HF cache
snapshots link to blobs). Any problem: a message naming the file on stderr, exit status 2.

Then it serves HTTP on --host/--port (default 0.0.0.0:8000):
  GET /health      200, empty body (503 with FAKE_VLLM_FAIL_HEALTH)
  GET /v1/models   {"object": "list", "data": [{"id": NAME, ...}]}
  GET /version     {"version": "0.0.0-fake"}
  POST /v1/completions       a small OpenAI-style completion naming the model (404 for another
                             model); with "stream": true, server-sent events (see below)
  POST /v1/chat/completions  the same as a chat completion (choices[].message / .delta)

Sleep mode, as vLLM serves it (vllm/entrypoints/serve/dev/sleep/api_router.py at e7a47b82: the
dev routers are attached only with VLLM_SERVER_DEV_MODE=1, else these are 404; sleeping needs
`--enable-sleep-mode`, else POST /sleep answers 500):
  POST /sleep?level=1|2   200, empty body, once asleep (FAKE_VLLM_SLEEP_SECONDS, default 0):
                          its GPU claim drops to FAKE_VLLM_SLEEP_GPU_BYTES (default 0);
                          completions answer 503 while it sleeps, health and models stay 200
  POST /wake_up           200, empty body, once awake: FAKE_VLLM_WAKE_SECONDS (default 0), then
                          its claim is whole again
  GET /is_sleeping        {"is_sleeping": true|false}
GPU claims for the fake NVML (tests/fake_nvml): with FAKE_NVML_CLAIMS_DIR=DIR and
FAKE_VLLM_GPU_BYTES=N, the server writes DIR/fake-vllm-PID once it serves: a line
`process GPU PID BYTES` for each GPU of CUDA_VISIBLE_DEVICES (N each, or the sleep figure while
it sleeps), rewritten atomically on every sleep and wake and removed when it exits on a signal.

Streaming ("stream": true): max_tokens (default 16) chunks of one token each (" tok0", " tok1",
...), in HTTP/1.1 chunked encoding; the last names finish_reason "length"; with
"stream_options": {"include_usage": true} a final chunk with empty choices and usage; then
`data: [DONE]`. Tokens are paced on absolute schedules (fake_stream.py), so the rates a client
measures are known in advance:
  --tokens-per-second R                  per stream, token i is due i/R s after the request
                                         (default 0: as fast as the server can write)
  --max-aggregate-tokens-per-second A    all streams together at most A tokens/s (default 0: none)
Failing completions on demand (smoke gates, error counts): --fail-completions, or
FAKE_VLLM_FAIL_COMPLETIONS=1, or FAKE_VLLM_FAIL_COMPLETIONS_FILE=PATH (fail while PATH exists):
completions and chat completions answer 500 with an OpenAI error; health and models stay fine.

Environment switches for tests:
  FAKE_VLLM_STARTUP_DELAY=SECS  sleep (float) before listening, like loading weights
  FAKE_VLLM_READ_WEIGHTS=1      read every byte of the model's *.safetensors (or its GGUF file)
                                before listening, as a real server loads its weights: from the
                                page cache that takes the time of a copy, from a cold disk the
                                disk's (tests/bench/switch/prewarm.sh measures both)
  FAKE_VLLM_ARGV_FILE=PATH      write sys.argv as a JSON list to PATH (strings as Python decoded
                                them: ensure_ascii=False, encoded as UTF-8 with surrogateescape,
                                so the file holds the exact argv bytes), and to PATH.bin the raw
                                bytes (os.fsencode) of every element, each followed by a NUL byte
                                (the /proc/PID/cmdline format). Both are written atomically, the
                                .bin file first.
  FAKE_VLLM_FAIL_HEALTH=1       /health answers 503 forever
  FAKE_VLLM_EXIT_AFTER=SECS     exit with status 1 that long after the start (crash loops)
  FAKE_VLLM_EXIT_AFTER_HEALTHY=SECS, or --exit-after-healthy SECS
                                exit with status 1 that long after it starts serving (after
                                FAKE_VLLM_STARTUP_DELAY): it passes a health gate, then crashes
  FAKE_VLLM_TOKENS_PER_SECOND=R, FAKE_VLLM_MAX_AGGREGATE_TOKENS_PER_SECOND=A
                                the pacing flags' defaults (for units berth renders)
  FAKE_VLLM_SPEED_MODEL=RULES   a deterministic speed for each configuration (berth tune's
                                sweeps): the pacing numbers chosen from the server's own command
                                line. RULES is RULE;RULE;... and the first rule that matches wins:
      RULE  = CONDS:A  or  CONDS:A/stream=R
              A: tokens/s of all streams together (as --max-aggregate-tokens-per-second; 0: no
              cap), R: tokens/s of one stream (as --tokens-per-second; > 0). Without /stream the
              per-stream rate is FAKE_VLLM_TOKENS_PER_SECOND's (default none: one stream
              alone gets A).
      CONDS = default                 every command line (only as the last rule)
            | COND,COND,...           each key at most once
      COND  = tp=N | pp=N | dp=N | max_num_seqs=N | spec=METHOD | ep | KEY=*
              tp: --tensor-parallel-size/-tp (sglang --tp-size, trtllm --tp_size); pp:
              --pipeline-parallel-size/-pp; dp: --data-parallel-size/-dp; max_num_seqs:
              --max-num-seqs; spec: the "method" of --speculative-config's JSON (a config
              without one only spec=* matches); ep: --enable-expert-parallel given.
      A rule matches when every key it names has that value (KEY=*: any), and every key it
      leaves out is as a command line without it has it: tp, pp, dp 1, no
      --enable-expert-parallel, no --speculative-config, no --max-num-seqs. So `tp=8` does not
      match `-tp 8 --enable-expert-parallel` (`tp=8,ep` does, `tp=8,ep=*` matches both).
      E.g. 'tp=4:2500;tp=8:3300;tp=8,ep:4000;default:1000/stream=50'. A pacing flag on the
      command line wins over the rule; when no rule matches, pacing is as without the variable.
      The start logs the rule used, and GET /_fake/pacing answers {"tokens_per_second": R,
      "max_aggregate_tokens_per_second": A, "speed_rule": CONDS or null}. With more streams
      than A/R, clients measure A together (fake_stream.Pacer's server-wide schedule), less
      only where the machine cannot keep up. A malformed RULES: a message naming the variable
      and the rule, exit status 2, before the model is read.
  FAKE_VLLM_EMPTY_COMPLETIONS=1 /v1/completions answers 200 with empty text (a failing smoke gate)
  FAKE_VLLM_ENV_DUMP=DIR        write the server's environment as JSON to DIR/serve.json (the fake
                                vllm package's engine check writes DIR/check.json)
  FAKE_VLLM_BAD_BYTES=1         (or --bad-bytes) every completion's text, every streamed token and
                                the message of every failed completion holds the byte 0xff, which
                                is not UTF-8, raw in the JSON (a server berth must survive)

SIGTERM and SIGINT: exit 0 at once.
"""

import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.dont_write_bytecode = True  # no __pycache__ beside the sources when a unit runs us
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_stream  # noqa: E402

PKG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pkg")


def engine_refusal(argv):
    """What `vllm serve ARGV` refuses before its engine starts, in vLLM's words; None if fine."""
    if argv[:1] != ["serve"]:
        return None
    sys.path.insert(0, PKG)
    from vllm import _fake_rules  # noqa: E402 - the fake package beside this file
    _fake_rules.SERVING = True
    try:
        _fake_rules.serve_check(argv)
    except Exception as e:  # noqa: BLE001 - the fake engine's refusal
        return "%s: %s" % (type(e).__name__, e)
    return None

# flag -> destination; flags that take one value.
VALUE_FLAGS = {
    "--served-model-name": "served_model_name",
    "--host": "host",
    "--port": "port",
    "--tensor-parallel-size": "tensor_parallel_size",
    "-tp": "tensor_parallel_size",
    "--pipeline-parallel-size": "pipeline_parallel_size",
    "-pp": "pipeline_parallel_size",
    "--gpu-memory-utilization": "gpu_memory_utilization",
    "--max-model-len": "max_model_len",
    "--data-parallel-size": "data_parallel_size",
    "-dp": "data_parallel_size",
    "--max-num-seqs": "max_num_seqs",
    "--speculative-config": "speculative_config",
    "--model": "model",
    # sglang
    "--model-path": "model",
    "--tp-size": "tensor_parallel_size",
    "--mem-fraction-static": "gpu_memory_utilization",
    "--context-length": "max_model_len",
    "-m": "module",
    # llama-server
    "--alias": "served_model_name",
    "--n-gpu-layers": "n_gpu_layers",
    "-ngl": "n_gpu_layers",
    "--ctx-size": "max_model_len",
    "-c": "max_model_len",
    # trtllm-serve (underscore spellings)
    "--tp_size": "tensor_parallel_size",
    "--tensor_parallel_size": "tensor_parallel_size",
    "--pp_size": "pipeline_parallel_size",
    "--pipeline_parallel_size": "pipeline_parallel_size",
    "--ep_size": "trtllm_ep_size",
    "--max_seq_len": "max_model_len",
    "--backend": "trtllm_backend",
    "--extra_llm_api_options": "trtllm_extra_options",
    # fake_vllm's own
    "--tokens-per-second": "tokens_per_second",
    "--max-aggregate-tokens-per-second": "max_aggregate_tokens_per_second",
    "--exit-after-healthy": "exit_after_healthy",
}
SWITCH_FLAGS = {"--enable-expert-parallel": "enable_expert_parallel",
                "--fail-completions": "fail_completions", "--bad-bytes": "bad_bytes",
                "--enable-sleep-mode": "enable_sleep_mode"}
INT_OPTIONS = ("port", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
               "max_model_len", "max_num_seqs", "trtllm_ep_size")
TRTLLM_OPTIONS = ("trtllm_ep_size", "trtllm_backend", "trtllm_extra_options")
RATE_OPTIONS = ("tokens_per_second", "max_aggregate_tokens_per_second", "exit_after_healthy")


class UsageError(Exception):
    pass


def parse_args(args):
    """Returns (options dict, unknown flags list). Like parse_known_args: unknown flags (and a
    value that follows them) are kept aside, not rejected."""
    opts = {"host": "0.0.0.0", "port": 8000, "tensor_parallel_size": 1,
            "pipeline_parallel_size": 1, "data_parallel_size": 1, "enable_expert_parallel": False,
            "fail_completions": False, "bad_bytes": False, "enable_sleep_mode": False,
            "tokens_per_second": os.environ.get("FAKE_VLLM_TOKENS_PER_SECOND") or "0",
            "max_aggregate_tokens_per_second":
                os.environ.get("FAKE_VLLM_MAX_AGGREGATE_TOKENS_PER_SECOND") or "0",
            "exit_after_healthy": os.environ.get("FAKE_VLLM_EXIT_AFTER_HEALTHY") or "0",
            "given": set()}  # the destinations the command line set
    unknown = []
    positionals = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positionals.extend(args[i:])
            break
        if arg.startswith("-") and len(arg) > 1:
            flag, eq, inline = arg.partition("=")
            if flag in VALUE_FLAGS:
                if eq:
                    value = inline
                elif i < len(args):
                    value = args[i]
                    i += 1
                else:
                    raise UsageError("flag %s needs a value" % flag)
                opts[VALUE_FLAGS[flag]] = value
                opts["given"].add(VALUE_FLAGS[flag])
            elif flag in SWITCH_FLAGS and not eq:
                opts[SWITCH_FLAGS[flag]] = True
            else:
                unknown.append(arg)
                # vLLM flags mostly take a value: keep a following non-flag word with the flag
                # unless it is the model (the first positional after `serve`).
                if (not eq and i < len(args) and not args[i].startswith("-")
                        and not (positionals == ["serve"] and "model" not in opts)):
                    unknown.append(args[i])
                    i += 1
            continue
        positionals.append(arg)
    if positionals[:1] == ["serve"]:
        positionals = positionals[1:]
        if positionals and "model" not in opts:
            opts["model"] = positionals.pop(0)
    unknown.extend(positionals)
    for key in INT_OPTIONS:
        if key in opts:
            try:
                opts[key] = int(opts[key])
            except ValueError:
                raise UsageError("%s must be an integer, got %r" % (key, opts[key]))
    for key in RATE_OPTIONS:
        try:
            opts[key] = float(opts[key])
        except ValueError:
            raise UsageError("%s must be a number, got %r" % (key, opts[key]))
        if not opts[key] >= 0 or opts[key] == float("inf"):
            raise UsageError("%s must be 0 or a positive number, got %r" % (key, opts[key]))
    # llama.cpp's -ngl: a number, "auto" or "all" (common/arg.cpp).
    ngl = opts.get("n_gpu_layers")
    if ngl is not None and ngl not in ("auto", "all"):
        try:
            int(ngl)
        except ValueError:
            raise UsageError("--n-gpu-layers takes a number, 'auto' or 'all', got %r" % ngl)
    opts["trtllm"] = any(k in opts for k in TRTLLM_OPTIONS) or any(
        a.split("=")[0] in ("--tp_size", "--pp_size", "--tensor_parallel_size") for a in args)
    if "gpu_memory_utilization" in opts:
        try:
            opts["gpu_memory_utilization"] = float(opts["gpu_memory_utilization"])
        except ValueError:
            raise UsageError("gpu memory fraction must be a number, got %r"
                             % opts["gpu_memory_utilization"])
    if "model" not in opts:
        raise UsageError("no model given (serve MODEL, --model-path MODEL or --model MODEL)")
    return opts, unknown


SPEED_MODEL_VAR = "FAKE_VLLM_SPEED_MODEL"
# The speed model's keys, each with the value a command line that does not set it has.
SPEED_DEFAULTS = {"tp": 1, "pp": 1, "dp": 1, "ep": False, "spec": None, "max_num_seqs": None}
SPEED_INT_KEYS = ("tp", "pp", "dp", "max_num_seqs")


def number(text, what, positive=False):
    """`text` as a finite float >= 0 (> 0 with `positive`); UsageError naming `what`."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf") or (positive and value == 0):
        raise UsageError("%s must be a %s, got %r"
                         % (what, "positive number" if positive else "number >= 0", text))
    return value


def parse_speed_model(text):
    """FAKE_VLLM_SPEED_MODEL (the grammar is in the module's docstring) as a list of rules, each
    {"text": the rule's conditions as written, "when": {key: value or "*"}, "aggregate": A,
    "stream": R or None}; "when" is None for `default`. UsageError naming the variable."""
    rules = []
    if not text.strip():
        return rules  # unset or empty: no speed model
    for n, part in enumerate(text.split(";"), 1):
        try:
            rules.append(parse_speed_rule(part.strip(), rules))
        except UsageError as e:
            raise UsageError("%s: rule %d %r: %s" % (SPEED_MODEL_VAR, n, part.strip(), e))
    return rules


def parse_speed_rule(part, before):
    """One rule of the speed model (see parse_speed_model); `before`: the rules ahead of it.
    UsageError saying what is wrong with it."""
    conds, colon, rate = (x.strip() for x in part.partition(":"))
    if not colon or not conds or not rate:
        raise UsageError("a rule is CONDITIONS:TOKENS_PER_SECOND (e.g. tp=8,ep:4000)")
    if before and before[-1]["when"] is None:
        raise UsageError("it comes after `default`, which matches every command line")
    aggregate, slash, stream = (x.strip() for x in rate.partition("/"))
    rule = {"text": conds, "aggregate": number(aggregate, "the aggregate tokens/s"),
            "stream": None, "when": None}
    if slash:
        key, eq, value = (x.strip() for x in stream.partition("="))
        if key != "stream" or not eq:
            raise UsageError("after '/' comes stream=R (the tokens/s of one stream)")
        rule["stream"] = number(value, "stream", positive=True)
    if conds == "default":
        return rule
    when = rule["when"] = {}
    for cond in conds.split(","):
        key, eq, value = (x.strip() for x in cond.partition("="))
        if key not in SPEED_DEFAULTS:
            raise UsageError("unknown key %r (the keys: %s; or `default` alone)"
                             % (key or cond, ", ".join(SPEED_DEFAULTS)))
        if key in when:
            raise UsageError("%s given twice" % key)
        if key == "ep":
            if eq and value != "*":
                raise UsageError("ep is a flag: `ep` (--enable-expert-parallel given) or `ep=*`")
            when[key] = "*" if eq else True
        elif not value:
            raise UsageError("%s needs a value (%s=VALUE or %s=*)" % (key, key, key))
        elif value == "*":
            when[key] = value
        elif key in SPEED_INT_KEYS:
            if not (value.isascii() and value.isdigit()) or int(value) < 1:
                raise UsageError("%s must be a positive integer or *, got %r" % (key, value))
            when[key] = int(value)
        elif all(c.isalnum() or c in "_-" for c in value):  # spec: a method name
            when[key] = value
        else:
            raise UsageError("spec must be a speculative method name or *, got %r" % value)
    return rule


def speed_config(opts):
    """The speed model's keys as the command line sets them."""
    spec = None
    if opts.get("speculative_config") is not None:
        try:
            parsed = json.loads(opts["speculative_config"])
        except ValueError:
            parsed = None
        method = parsed.get("method") if isinstance(parsed, dict) else None
        spec = method if isinstance(method, str) else ""  # only spec=* matches a config without one
    return {"tp": opts["tensor_parallel_size"], "pp": opts["pipeline_parallel_size"],
            "dp": opts["data_parallel_size"], "ep": opts["enable_expert_parallel"],
            "spec": spec, "max_num_seqs": opts.get("max_num_seqs")}


def match_speed_rule(rules, config):
    """The first rule matching `config` (speed_config), or None."""
    for rule in rules:
        when = rule["when"]
        if when is None or all(
                (when[k] == "*" or when[k] == v) if k in when else v == SPEED_DEFAULTS[k]
                for k, v in config.items()):
            return rule
    return None


def pacing(opts, rules):
    """(tokens/s per stream, aggregate tokens/s, the rule used or None): a pacing flag on the
    command line, else the speed model's matching rule, else the FAKE_VLLM_ pacing variables."""
    rule = match_speed_rule(rules, speed_config(opts)) if rules else None
    rate = opts["tokens_per_second"]
    cap = opts["max_aggregate_tokens_per_second"]
    if rule is not None:
        if rule["stream"] is not None and "tokens_per_second" not in opts["given"]:
            rate = rule["stream"]
        if "max_aggregate_tokens_per_second" not in opts["given"]:
            cap = rule["aggregate"]
    return rate, cap, rule


class ModelError(Exception):
    pass


def read_json_file(path):
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise ModelError("%s: missing" % path)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ModelError("%s: not valid JSON: %s" % (path, e))


def read_safetensors_header(path):
    try:
        with open(path, "rb") as f:
            size_bytes = f.read(8)
            if len(size_bytes) != 8:
                raise ModelError("%s: too short for a safetensors header" % path)
            (n,) = struct.unpack("<Q", size_bytes)
            if n == 0 or n > 100 * 1024 * 1024:
                raise ModelError("%s: implausible safetensors header length %d" % (path, n))
            header = f.read(n)
            if len(header) != n:
                raise ModelError("%s: safetensors header truncated (%d of %d bytes)"
                                 % (path, len(header), n))
    except OSError as e:
        raise ModelError("%s: cannot read: %s" % (path, e))
    try:
        parsed = json.loads(header.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ModelError("%s: safetensors header is not valid JSON: %s" % (path, e))
    if not isinstance(parsed, dict):
        raise ModelError("%s: safetensors header is not a JSON object" % path)
    return parsed


def read_weights(model):
    """Reads every byte of the weights (the *.safetensors of a directory, or a GGUF file) in
    8 MiB reads; returns (seconds, bytes)."""
    if os.path.isfile(model):
        paths = [model]
    else:
        paths = [os.path.join(model, n) for n in sorted(os.listdir(model))
                 if n.endswith(".safetensors")]
    start = time.monotonic()
    total = 0
    for path in paths:
        with open(path, "rb", buffering=0) as f:
            while True:
                chunk = f.read(8 << 20)
                if not chunk:
                    break
                total += len(chunk)
    return time.monotonic() - start, total


def load_model(model):
    """Reads the model's files like a server would; returns config.json's content ({} for GGUF)."""
    if os.path.isfile(model):
        try:
            with open(model, "rb") as f:
                magic = f.read(4)
        except OSError as e:
            raise ModelError("%s: cannot read: %s" % (model, e))
        if magic != b"GGUF":
            raise ModelError("%s: not a GGUF file (magic %r)" % (model, magic))
        return {}
    if not os.path.isdir(model):
        raise ModelError("%s: model directory not found" % model)
    config = read_json_file(os.path.join(model, "config.json"))
    if not isinstance(config, dict):
        raise ModelError("%s: not a JSON object" % os.path.join(model, "config.json"))
    names = sorted(os.listdir(model))
    weights = [n for n in names if n.endswith(".safetensors")]
    if not weights:
        raise ModelError("%s: no *.safetensors file in the model directory" % model)
    for name in weights:
        read_safetensors_header(os.path.join(model, name))
    index_path = os.path.join(model, "model.safetensors.index.json")
    if os.path.lexists(index_path):
        index = read_json_file(index_path)
        weight_map = index.get("weight_map", {}) if isinstance(index, dict) else None
        if not isinstance(weight_map, dict):
            raise ModelError("%s: no weight_map object" % index_path)
        for shard in sorted(set(weight_map.values())):
            if not os.path.isfile(os.path.join(model, str(shard))):
                raise ModelError("%s: shard %s named by %s is missing"
                                 % (os.path.join(model, str(shard)), shard, index_path))
    return config


def write_atomically(path, data):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def write_argv_files(path):
    raw = b"".join(os.fsencode(a) + b"\0" for a in sys.argv)
    write_atomically(path + ".bin", raw)
    text = json.dumps(sys.argv, ensure_ascii=False)
    write_atomically(path, text.encode("utf-8", "surrogateescape"))


def log(msg):
    sys.stderr.write("fake-vllm: %s\n" % msg)
    sys.stderr.flush()


CLAIM = {"path": None}  # this server's claim file, removed on a signal


def gpu_claim_path():
    claims = os.environ.get("FAKE_NVML_CLAIMS_DIR")
    return os.path.join(claims, "fake-vllm-%d" % os.getpid()) if claims else None


def write_claim(asleep):
    """Writes this server's GPU claim for the fake NVML (see the module's docstring)."""
    path = gpu_claim_path()
    if not path:
        return
    key = "FAKE_VLLM_SLEEP_GPU_BYTES" if asleep else "FAKE_VLLM_GPU_BYTES"
    per_gpu = int(os.environ.get(key) or 0)
    gpus = [g for g in (os.environ.get("CUDA_VISIBLE_DEVICES") or "").split(",") if g.strip()]
    lines = "".join("process %s %d %d\n" % (g.strip(), os.getpid(), per_gpu) for g in gpus)
    write_atomically(path, lines.encode())
    CLAIM["path"] = path


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "fake-vllm/0.0.0"

        def setup(self):
            super().setup()
            # Like uvicorn (asyncio) under vLLM: every event leaves at once, not held back by
            # Nagle's algorithm until the client acknowledges the last one.
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, fmt, *args):  # one line per request, to stderr
            sys.stderr.write("fake-vllm: %s %s\n" % (self.address_string(), fmt % args))

        def reply(self, code, body=None):
            data = b"" if body is None else fake_stream.dump_json(body, state["bad_bytes"])
            self.send_response(code)
            if body is not None:
                self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        def not_found(self):
            self.reply(404, {"object": "error", "message": "Not Found: %s" % self.path,
                             "type": "NotFoundError", "code": 404})

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            if path == "/health":
                if state["fail_health"]:
                    self.reply(503, {"object": "error", "message": "unhealthy (fake)",
                                     "code": 503})
                else:
                    self.reply(200)
            elif path == "/v1/models":
                self.reply(200, {"object": "list", "data": [{
                    "id": state["name"], "object": "model", "created": state["created"],
                    "owned_by": "fake-vllm", "root": state["model"],
                    "max_model_len": state["max_model_len"]}]})
            elif path == "/_fake/stats":
                # What the fake sent, for tests that compare a client's counts with it: tokens
                # written to a client (content chunks), and streams it finished ([DONE] sent).
                with state["lock"]:
                    self.reply(200, {"requests": state["requests"],
                                     "tokens_sent": state["tokens_sent"],
                                     "streams_finished": state["streams_finished"]})
            elif path == "/_fake/pacing":
                # The pacing it was given: per stream and in all (0: no limit), and the speed
                # model's rule that chose them (its conditions as written) or null.
                self.reply(200, {"tokens_per_second": state["pacer"].rate,
                                 "max_aggregate_tokens_per_second": state["pacer"].cap,
                                 "speed_rule": state["speed_rule"]})
            elif path == "/version":
                self.reply(200, {"version": "0.0.0-fake"})
            elif path == "/is_sleeping" and state["dev_mode"]:
                with state["lock"]:
                    self.reply(200, {"is_sleeping": state["sleeping"] > 0})
            else:
                self.not_found()

        def sleep_or_wake(self, path, query):
            """POST /sleep and /wake_up (see the module's docstring)."""
            if not state["sleep_mode"]:
                self.reply(500, {"object": "error", "type": "InternalServerError", "code": 500,
                                 "message": "Sleep mode is not enabled: start the server with "
                                            "--enable-sleep-mode"})
                return
            if path == "/sleep":
                level = (query.get("level") or ["1"])[0]
                if level not in ("1", "2"):
                    self.reply(400, {"object": "error", "type": "BadRequestError", "code": 400,
                                     "message": "level must be 1 or 2, got %r" % level})
                    return
                time.sleep(float(os.environ.get("FAKE_VLLM_SLEEP_SECONDS") or 0))
                with state["lock"]:
                    state["sleeping"] = int(level)
                    write_claim(asleep=True)
                log("asleep (level %s)" % level)
            else:
                time.sleep(float(os.environ.get("FAKE_VLLM_WAKE_SECONDS") or 0))
                with state["lock"]:
                    state["sleeping"] = 0
                    write_claim(asleep=False)
                log("awake")
            self.reply(200)

        def failing(self):
            if state["fail_completions"]:
                return True
            path = state["fail_file"]
            return bool(path) and os.path.lexists(path)

        def do_POST(self):
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length > 0 else b""
            if path in ("/sleep", "/wake_up") and state["dev_mode"]:
                query = urllib.parse.parse_qs(self.path.partition("?")[2])
                self.sleep_or_wake(path, query)
                return
            if path not in ("/v1/completions", "/v1/chat/completions"):
                self.not_found()
                return
            if state["sleeping"]:
                self.reply(503, {"object": "error", "type": "ServiceUnavailableError",
                                 "code": 503, "message": "the engine is sleeping (fake_vllm)"})
                return
            chat = path == "/v1/chat/completions"
            try:
                request = json.loads(body.decode("utf-8") or "{}")
                if not isinstance(request, dict):
                    raise ValueError("request is not a JSON object")
            except (UnicodeDecodeError, ValueError) as e:
                self.reply(400, {"object": "error", "message": "bad request: %s" % e,
                                 "type": "BadRequestError", "code": 400})
                return
            model = request.get("model", state["name"])
            if model != state["name"]:
                self.reply(404, {"object": "error",
                                 "message": "The model `%s` does not exist." % model,
                                 "type": "NotFoundError", "code": 404})
                return
            bad = fake_stream.BAD if state["bad_bytes"] else ""
            if self.failing():
                self.reply(500, {"object": "error",
                                 "message": "completion failed%s (fake_vllm told to fail)" % bad,
                                 "type": "InternalServerError", "code": 500})
                return
            with state["lock"]:
                state["requests"] += 1
                n = state["requests"]
            ident = ("chatcmpl-fake-%d" if chat else "cmpl-fake-%d") % n
            if request.get("stream") is True:
                self.stream(ident, model, chat, request, bad)
                return
            prompt_tokens = fake_stream.prompt_tokens(request, chat)
            text = "" if state["empty_completions"] else " fake completion%s from %s" % (bad, model)
            if chat:
                choice = {"index": 0, "message": {"role": "assistant", "content": text},
                          "logprobs": None, "finish_reason": "length"}
            else:
                choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}
            self.reply(200, {
                "id": ident, "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()), "model": model, "choices": [choice],
                "usage": {"prompt_tokens": prompt_tokens,
                          "completion_tokens": len(text.split()),
                          "total_tokens": prompt_tokens + len(text.split())}})

        def stream(self, ident, model, chat, request, bad=""):
            """Server-sent events in chunked encoding, each written when the pacer says."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for event in fake_stream.stream_events(state["pacer"], ident, model, chat,
                                                       request, bad):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    self.wfile.flush()
                    if event.startswith(b'data: {"id"') and b'"usage"' not in event:
                        with state["lock"]:
                            state["tokens_sent"] += 1
                self.wfile.write(b"0\r\n\r\n")
                with state["lock"]:
                    state["streams_finished"] += 1
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client went away (a benchmark's end)

        do_HEAD = do_GET

    return Handler


def crash_after_healthy(seconds):
    """With --exit-after-healthy S: exit with status 1 S seconds after it started serving (from
    then on /health answers 200): a server that passes its health gate, then crashes. A
    restarted one crashes again, whether or not anyone asked it anything."""
    if not seconds or os.environ.get("FAKE_VLLM_FAIL_HEALTH"):
        return

    def crash():
        log("--exit-after-healthy %g: exiting with status 1" % seconds)
        os._exit(1)
    timer = threading.Timer(seconds, crash)
    timer.daemon = True
    timer.start()


class Server(ThreadingHTTPServer):
    # A benchmark opens a hundred connections at once: the default backlog of 5 would make
    # most of them retry their SYN a second later.
    request_queue_size = 1024


def on_signal(signum, frame):
    # Unbuffered and best effort: a handler that took the stream's lock could wait forever on
    # a writer it interrupted (or on a full journal pipe), and systemd's stop would time out.
    try:
        os.write(2, b"fake_vllm: signal %d: exiting\n" % signum)
    except OSError:
        pass
    if CLAIM["path"]:
        try:
            os.unlink(CLAIM["path"])  # its GPUs are free: the fake NVML lists it no more
        except OSError:
            pass
    os._exit(0)


def main():
    if sys.argv[1:] == ["--version"]:
        print("version: 0 (fake_vllm)\nbuilt with fake_vllm.py for berth's tests")
        return 0
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    argv_file = os.environ.get("FAKE_VLLM_ARGV_FILE")
    if argv_file:
        write_argv_files(argv_file)
    exit_after = os.environ.get("FAKE_VLLM_EXIT_AFTER")
    if exit_after:
        def crash():
            log("FAKE_VLLM_EXIT_AFTER=%s: exiting with status 1" % exit_after)
            os._exit(1)
        timer = threading.Timer(float(exit_after), crash)
        timer.daemon = True
        timer.start()
    try:
        opts, unknown = parse_args(sys.argv[1:])
    except UsageError as e:
        log("usage: %s" % e)
        return 2
    try:
        speed_rules = parse_speed_model(os.environ.get(SPEED_MODEL_VAR) or "")
    except UsageError as e:
        log("usage: %s" % e)
        return 2
    if unknown:
        log("ignoring unknown arguments: %s" % " ".join(unknown))
    try:
        config = load_model(opts["model"])
    except ModelError as e:
        log("cannot load model: %s" % e)
        return 2
    dump = os.environ.get("FAKE_VLLM_ENV_DUMP")
    if dump:
        write_atomically(os.path.join(dump, "serve.json"),
                         json.dumps(dict(os.environ), indent=1, sort_keys=True).encode())
    refusal = engine_refusal(sys.argv[1:])
    if refusal:
        log(refusal)
        return 1
    name = opts.get("served_model_name") or opts["model"]
    if opts["trtllm"]:
        extra = opts.get("trtllm_extra_options")
        if extra is not None:
            try:
                with open(extra, "rb"):
                    pass
            except OSError as e:
                log("cannot read --extra_llm_api_options %s: %s" % (extra, e))
                return 1
        if os.path.isdir(opts["model"]):
            name = os.path.basename(os.path.normpath(opts["model"]))
    if os.environ.get("FAKE_VLLM_READ_WEIGHTS") == "1":
        try:
            took, read = read_weights(opts["model"])
        except OSError as e:
            log("cannot read the weights: %s" % e)
            return 1
        log("read %d bytes of weights in %.3fs" % (read, took))
    delay = float(os.environ.get("FAKE_VLLM_STARTUP_DELAY") or 0)
    if delay > 0:
        log("loading weights (sleeping %.3fs)" % delay)
        time.sleep(delay)
    max_len = opts.get("max_model_len") or config.get("max_position_embeddings") or 4096
    rate, cap, rule = pacing(opts, speed_rules)
    if speed_rules:
        log("%s: %s: %g tokens/s in all, %g per stream (0: no limit)"
            % (SPEED_MODEL_VAR, "rule %r" % rule["text"] if rule else "no rule matches",
               cap, rate))
    state = {
        "name": name,
        "model": opts["model"],
        "max_model_len": int(max_len),
        "created": int(time.time()),
        "fail_health": bool(os.environ.get("FAKE_VLLM_FAIL_HEALTH")),
        "empty_completions": bool(os.environ.get("FAKE_VLLM_EMPTY_COMPLETIONS")),
        "bad_bytes": opts["bad_bytes"] or bool(os.environ.get("FAKE_VLLM_BAD_BYTES")),
        "requests": 0,
        "tokens_sent": 0,
        "streams_finished": 0,
        "lock": threading.Lock(),
        "fail_completions": opts["fail_completions"] or
            bool(os.environ.get("FAKE_VLLM_FAIL_COMPLETIONS")),
        "fail_file": os.environ.get("FAKE_VLLM_FAIL_COMPLETIONS_FILE") or "",
        "pacer": fake_stream.Pacer(rate, cap),
        "speed_rule": rule["text"] if rule else None,
        "dev_mode": os.environ.get("VLLM_SERVER_DEV_MODE") == "1",
        "sleep_mode": opts["enable_sleep_mode"],
        "sleeping": 0,  # the sleep level; 0: awake
    }
    try:
        server = Server((opts["host"], opts["port"]), make_handler(state))
    except OSError as e:
        log("cannot listen on %s:%d: %s" % (opts["host"], opts["port"], e))
        return 1
    server.daemon_threads = True
    log("serving %s as %r on http://%s:%d (tp=%d pp=%d)" % (
        opts["model"], state["name"], opts["host"], opts["port"],
        opts["tensor_parallel_size"], opts["pipeline_parallel_size"]))
    crash_after_healthy(opts["exit_after_healthy"])
    try:
        write_claim(asleep=False)
    except OSError as e:
        log("cannot write the GPU claim: %s" % e)
        return 1
    server.serve_forever(poll_interval=0.1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
