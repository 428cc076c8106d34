#!/usr/bin/python3
"""make_world.py - the world of the switch benchmark (see README.md beside this file).

  make_world.py models   --store DIR [--weights-gib G] [--engine llama --llama-src DIR]
  make_world.py manifest --store DIR --unit-dir DIR --vllm PATH --env-dir DIR --port P
                         --serving a|b [--front] [--gpu room|full] [--read-weights]
                         [--no-prewarm] [--engine llama --llama-server PATH [--stop-timeout T]]
                         --out FILE
  make_world.py nvml     --gpu room|full --cgroup DIR --out FILE [--until PATH]

`models`: two tiny fake models, bench/switch-a and bench/switch-b, in the Hugging Face cache
layout (blobs, snapshots/<commit> of symlinks, refs/main) at pinned commits: no Hub is asked.
--weights-gib G gives b G more safetensors files of 1 GiB each (written once, synced), the
weights its fake vLLM reads at start with --read-weights (the prewarm modes).
`manifest`: service svc-a (model a, served as "a") and svc-b (model b, served as "b"), both on
port P, GPU 0; --serving says which one runs (the other is `state: stopped`). svc-b's fake vLLM
loads for 4 s (FAKE_VLLM_STARTUP_DELAY in its env file); with --read-weights it reads every
byte of its safetensors at start instead (FAKE_VLLM_READ_WEIGHTS=1, no delay). --no-prewarm
sets host.prewarm: false. --front adds the top-level
`fronts: {P: {hold: 10m, drain: 2m}}`. --gpu sets gpu_memory_utilization: room 0.40 (two fit on
the GPU), full 0.90 (one fills it).
--engine llama (the real-engine modes): the models are bench/switch-llama-a and -b, one
random-weight GGUF each (tests/real_engine/make_gguf.py with llama.cpp's gguf-py from
--llama-src; LLAMA_SHAPE: about 300 MB, so that loading one is visible), and the services are
llama.cpp's llama-server (--llama-server), on the CPU (n_gpu_layers 0, no GPU), served as "a"
and "b": nothing is faked, svc-b's load is the real one. --stop-timeout T gives both services
`stop_timeout: T` (the unit's TimeoutStopSec: llama-server with requests in flight waits for them
at SIGTERM, so without a front the old server's stop is dark time, up to it). berth does not prewarm a GGUF (the plan
says why), so --no-prewarm changes no step there.
`nvml`: the fake NVML's config (tests/fake_nvml/fake_nvml.cc): one 80 GiB GPU holding what the
running fake servers would claim (0.40 or 0.90 of it each), by the PIDs in the sandbox's
DIR/system.slice/svc-{a,b}.service/cgroup.procs (what NVML would list). With --until it keeps
the file in step every 100 ms until PATH exists (the GPU follows the switch).
Python 3 standard library only.
"""

import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "fake_vllm"))
import make_model  # noqa: E402

GIB = 1 << 30
# The real-engine models' shape: F32, 32,000 tokens of vocabulary; 2 x 98 MB of embedding and
# output, 4 layers of 21 MB: about 280 MB on disk, a decode step of some tens of ms on 2 cores.
LLAMA_SHAPE = ["--embd", "768", "--layers", "4", "--ff", "1536", "--heads", "8", "--kv", "4"]
GPU_BYTES = 80 * GIB
GMU = {"room": 0.40, "full": 0.90}
TOKENS_PER_SECOND = 50  # the fake's pace per stream: a 150-token stream lasts 3 s


def commit_of(name):
    return hashlib.sha1(b"berth-switch-bench-" + name.encode()).hexdigest()


def repo_of(name, engine="fake"):
    return "bench/switch-%s%s" % ("llama-" if engine == "llama" else "", name)


def folder_of(store, name, engine="fake"):
    return os.path.join(store, "models--" + repo_of(name, engine).replace("/", "--"))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(8 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def big_weights(tmp, gib):
    """`gib` safetensors files of 1 GiB of one U8 tensor each, synced (their pages clean, so
    that an eviction can drop them)."""
    block = b"\x5a" * (8 << 20)
    for i in range(gib):
        header = json.dumps({"w%d" % i: {"dtype": "U8", "shape": [1 << 30],
                                         "data_offsets": [0, 1 << 30]}}).encode()
        with open(os.path.join(tmp, "big-%05d.safetensors" % i), "wb") as f:
            f.write(struct.pack("<Q", len(header)) + header)
            for _ in range(128):
                f.write(block)
            f.flush()
            os.fsync(f.fileno())


def make_gguf(tmp, llama_src, seed):
    """One random-weight GGUF of LLAMA_SHAPE, synced (its pages clean: an eviction drops them)."""
    os.makedirs(tmp, exist_ok=True)
    out = os.path.join(tmp, "model.gguf")
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "real_engine", "make_gguf.py"),
                    "--llama-src", llama_src, "--out", out, "--seed", str(seed)] + LLAMA_SHAPE,
                   check=True, stdout=subprocess.DEVNULL, timeout=600)
    with open(out, "rb") as f:
        os.fsync(f.fileno())


def cmd_models(a):
    for seed, name in enumerate(("a", "b"), 1):
        folder = folder_of(a.store, name, a.engine)
        snap = os.path.join(folder, "snapshots", commit_of(name))
        big = len([f for f in os.listdir(snap) if f.startswith("big-")]) if os.path.isdir(snap) else 0
        if os.path.isdir(snap) and (name == "a" or big == a.weights_gib or a.engine == "llama"):
            continue
        if os.path.isdir(snap):  # another weight size asked: made again
            shutil.rmtree(folder)
        tmp = os.path.join(folder, ".make")
        if a.engine == "llama":
            make_gguf(tmp, a.llama_src, seed)
        else:
            make_model.make_model(tmp)
        if name == "b" and a.engine != "llama":
            big_weights(tmp, a.weights_gib)
        os.makedirs(os.path.join(folder, "blobs"), exist_ok=True)
        os.makedirs(snap, exist_ok=True)
        for f in sorted(os.listdir(tmp)):
            digest = sha256_file(os.path.join(tmp, f))
            os.replace(os.path.join(tmp, f), os.path.join(folder, "blobs", digest))
            os.symlink(os.path.join("..", "..", "blobs", digest), os.path.join(snap, f))
        os.rmdir(tmp)
        os.makedirs(os.path.join(folder, "refs"), exist_ok=True)
        with open(os.path.join(folder, "refs", "main"), "w") as f:
            f.write(commit_of(name))
    return 0


def env_file(env_dir, name, read_weights=False, claims=None, gpu="room"):
    """The unit's environment: the fake vllm package for berth's engine check, the fake's pace,
    and for b a 4 s load (or, read_weights, the read of its weights). With `claims` (the switch
    back modes) both load for 4 s, wake in 0.5 s, and claim their GPU memory in the fake NVML's
    claims folder themselves (512 MiB while asleep)."""
    os.makedirs(env_dir, exist_ok=True)
    path = os.path.join(env_dir, "svc-%s.env" % name)
    lines = ["PYTHONPATH=%s" % os.path.join(ROOT, "tests", "fake_vllm", "pkg"),
             "FAKE_VLLM_TOKENS_PER_SECOND=%d" % TOKENS_PER_SECOND]
    if claims:
        lines += ["FAKE_VLLM_STARTUP_DELAY=4", "FAKE_VLLM_WAKE_SECONDS=0.5",
                  "FAKE_NVML_CLAIMS_DIR=%s" % claims,
                  "FAKE_VLLM_GPU_BYTES=%d" % int(GMU[gpu] * GPU_BYTES),
                  "FAKE_VLLM_SLEEP_GPU_BYTES=%d" % (512 << 20)]
    elif name == "b":
        lines.append("FAKE_VLLM_READ_WEIGHTS=1" if read_weights else "FAKE_VLLM_STARTUP_DELAY=4")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def llama_service(a, name):
    """svc-NAME as llama-server on the CPU (the real-engine modes)."""
    return ["    engine: llama-server",
            "    port: %d" % a.port,
            "    bind: 127.0.0.1",
            "    state: %s" % ("running" if a.serving == name else "stopped"),
            "    llama_server: {model_file: model.gguf, n_gpu_layers: 0, ctx_size: 8192, "
            "parallel: 8, alias: %s}" % name,
            "    health: {timeout: 120s, interval: 100ms}"] + (
                ["    stop_timeout: %s" % a.stop_timeout] if a.stop_timeout else [])


def cmd_manifest(a):
    llama = a.engine == "llama"
    out = ["berth: 1", "host:", "  store: %s" % a.store, "  unit_dir: %s" % a.unit_dir,
           "  executables: {%s: %s}" % (("llama-server", a.llama_server) if llama
                                        else ("vllm", a.vllm))]
    if a.no_prewarm:
        out.append("  prewarm: false")
    out.append("models:")
    for name in ("a", "b"):
        out.append("  model-%s: {source: hf://%s, revision: %s, keep: true}"
                   % (name, repo_of(name, a.engine), commit_of(name)))
    if a.front:
        out += ["fronts:", "  %d: {hold: 10m, drain: 2m}" % a.port]
    out.append("services:")
    for name in ("a", "b"):
        if llama:
            out += ["  svc-%s:" % name, "    model: model-%s" % name] + llama_service(a, name)
            continue
        out += ["  svc-%s:" % name,
                "    model: model-%s" % name,
                "    engine: vllm",
                "    gpus: [0]",
                "    port: %d" % a.port,
                "    bind: 127.0.0.1",
                "    state: %s" % ("running" if a.serving == name else "stopped"),
                "    vllm: {gpu_memory_utilization: %.2f, max_model_len: 2048, "
                "served_model_name: %s}" % (GMU[a.gpu], name),
                "    health: {timeout: 60s, interval: 100ms}",
                "    env_file: %s" % env_file(a.env_dir, name, a.read_weights, a.claims, a.gpu)]
        if a.standby:
            out.append("    standby: sleep")
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


def main_pid(cgroup, unit):
    try:
        with open(os.path.join(cgroup, "system.slice", unit, "cgroup.procs")) as f:
            pids = [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return 0
    return min(pids) if pids else 0


def write_nvml(a):
    claim = int(GMU[a.gpu] * GPU_BYTES)
    procs = [pid for pid in (main_pid(a.cgroup, "svc-a.service"),
                             main_pid(a.cgroup, "svc-b.service")) if pid > 0]
    lines = ["# the switch bench's GPU: %s" % a.gpu,
             "device 0 GPU-bench-0000 %d %d 0 NVIDIA H100 80GB HBM3"
             % (GPU_BYTES, min(GPU_BYTES, claim * len(procs)))]
    lines += ["process 0 %d %d" % (pid, claim) for pid in procs]
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, a.out)  # the fake reads it at every nvmlInit: never half a file


def cmd_nvml(a):
    write_nvml(a)
    deadline = time.monotonic() + 600  # bounded, whatever happens to the caller
    while a.until and not os.path.exists(a.until) and time.monotonic() < deadline:
        time.sleep(0.1)
        write_nvml(a)
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("models")
    m.add_argument("--store", required=True)
    m.add_argument("--weights-gib", type=int, default=0)
    m.add_argument("--engine", choices=("fake", "llama"), default="fake")
    m.add_argument("--llama-src", default=None)
    f = sub.add_parser("manifest")
    for k in ("--store", "--unit-dir", "--vllm", "--env-dir", "--out"):
        f.add_argument(k, required=True)
    f.add_argument("--port", type=int, required=True)
    f.add_argument("--serving", choices=("a", "b"), required=True)
    f.add_argument("--front", action="store_true")
    f.add_argument("--gpu", choices=("room", "full"), default="room")
    f.add_argument("--read-weights", action="store_true")
    f.add_argument("--no-prewarm", action="store_true")
    f.add_argument("--claims", default=None)  # the switch-back modes' fake NVML claims folder
    f.add_argument("--standby", action="store_true")  # standby: sleep on both services
    f.add_argument("--engine", choices=("fake", "llama"), default="fake")
    f.add_argument("--llama-server", default=None)
    f.add_argument("--stop-timeout", default=None)  # the services' stop_timeout (llama)
    n = sub.add_parser("nvml")
    n.add_argument("--gpu", choices=("room", "full"), required=True)
    n.add_argument("--cgroup", required=True)
    n.add_argument("--until", default=None)
    n.add_argument("--out", required=True)
    a = p.parse_args(argv)
    return {"models": cmd_models, "manifest": cmd_manifest, "nvml": cmd_nvml}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
