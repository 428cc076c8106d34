#!/usr/bin/python3
"""make_world.py - the world of the on-demand benchmark (see README.md beside this file).

  make_world.py models   --store DIR --llama-src DIR [--names a,b]
  make_world.py manifest --store DIR --unit-dir DIR --llama-server PATH --berth PATH
                         --base-port P [--names a,b] [--idle-stop 2s] [--routed] --out FILE

`models`: one random-weight GGUF per name (tests/real_engine/make_gguf.py with llama.cpp's
gguf-py from --llama-src, /usr/bin/python3 for numpy; SHAPE: F32, 624 MB), as the models
bench/on-demand-NAME in the Hugging Face cache layout (blobs, snapshots/<commit> of symlinks,
refs/main) at pinned commits: no Hub is asked. Made once: a model already in the store is kept.
`manifest`: per name two llama-server services on the CPU serving that model as NAME:
  svc-NAME    on_demand: true, idle_stop (default 2s), swap_group cpu, port P+i (the socket),
              server_port P+10+i (the model server, on loopback);
  --routed: `fronts: {P: {route: model}}` and every svc-NAME on port P (the front routes by
              the request's model; each socket on a loopback backend port berth picks);
  plain-NAME  an ordinary service, state: stopped, port P+20+i: the unit an operator starts and
              stops by hand (berth writes it and starts nothing).
Both kinds run the same llama-server command line (on the CPU, one thread, the weights read
into memory: THREADS and ARGS below), so the difference measured is berth's on-demand
machinery, not the server.
Python 3 standard library only (the GGUF is written by make_gguf.py).
"""

import argparse
import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
# F32, 32,000 tokens of vocabulary: 2 x 131 MB of embedding and output, 8 layers of 45 MB:
# 624 MB on disk; a decode step of about 20 ms on 2 cores.
SHAPE = ["--embd", "1024", "--layers", "8", "--ff", "2816", "--heads", "16", "--kv", "4"]
# --load-mode none (this llama.cpp's name for --no-mmap, which it calls deprecated): the server
# reads its weights into its own memory at start (about 0.7 s here from the page cache), as a
# GPU server copies them to the GPU; mapped, a CPU server "loads" any size in 0.3 s and the load
# this bench is about would not show.
ARGS = "[--load-mode, none]"
# One generation thread: two on 2 shared cores (other builds running beside the bench) spin on
# llama.cpp's thread barrier while one of them waits for a core, and a 25 ms first token took
# 0.8 to 1 s now and then (seen, beside the load going from 0.9 to 4.2 s).
THREADS = 1


def commit_of(name):
    return hashlib.sha1(b"berth-on-demand-bench-" + name.encode()).hexdigest()


def repo_of(name):
    return "bench/on-demand-" + name


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(8 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cmd_models(a):
    for seed, name in enumerate(a.names.split(","), 1):
        folder = os.path.join(a.store, "models--" + repo_of(name).replace("/", "--"))
        snap = os.path.join(folder, "snapshots", commit_of(name))
        if os.path.exists(os.path.join(snap, "model.gguf")):
            continue
        tmp = os.path.join(folder, ".make")
        os.makedirs(tmp, exist_ok=True)
        out = os.path.join(tmp, "model.gguf")
        subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tests", "real_engine",
                                                         "make_gguf.py"),
                        "--llama-src", a.llama_src, "--out", out, "--seed", str(seed)] + SHAPE,
                       check=True, stdout=subprocess.DEVNULL, timeout=600)
        digest = sha256_file(out)
        os.makedirs(os.path.join(folder, "blobs"), exist_ok=True)
        os.makedirs(snap, exist_ok=True)
        os.replace(out, os.path.join(folder, "blobs", digest))
        os.symlink(os.path.join("..", "..", "blobs", digest), os.path.join(snap, "model.gguf"))
        os.rmdir(tmp)
        os.makedirs(os.path.join(folder, "refs"), exist_ok=True)
        with open(os.path.join(folder, "refs", "main"), "w") as f:
            f.write(commit_of(name))
    return 0


def cmd_manifest(a):
    names = a.names.split(",")
    out = ["berth: 1", "host:", "  store: %s" % a.store, "  unit_dir: %s" % a.unit_dir,
           "  executables: {llama-server: %s, berth: %s}" % (a.llama_server, a.berth),
           "models:"]
    for name in names:
        out.append("  model-%s: {source: hf://%s, revision: %s, keep: true}"
                   % (name, repo_of(name), commit_of(name)))
    if a.routed:  # one public port for both, routed by the body's model (HAProxy)
        out += ["fronts:", "  %d: {route: model}" % a.base_port]
    out.append("services:")
    common = ["    engine: llama-server", "    bind: 127.0.0.1",
              "    health: {timeout: 120s, interval: 100ms}", "    args: %s" % ARGS]
    for i, name in enumerate(names):
        server = ("    llama_server: {model_file: model.gguf, n_gpu_layers: 0, ctx_size: 8192, "
                  "parallel: 4, threads: %d, alias: %s}" % (THREADS, name))
        out += ["  svc-%s:" % name, "    model: model-%s" % name, server] + common + [
            "    port: %d" % (a.base_port + (0 if a.routed else i)),
            "    on_demand: true",
            "    idle_stop: %s" % a.idle_stop,
            "    swap_group: cpu",
            "    server_port: %d" % (a.base_port + 10 + i)]
        out += ["  plain-%s:" % name, "    model: model-%s" % name, server] + common + [
            "    port: %d" % (a.base_port + 20 + i),
            "    state: stopped"]
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("models")
    m.add_argument("--store", required=True)
    m.add_argument("--llama-src", required=True)
    m.add_argument("--names", default="a,b")
    f = sub.add_parser("manifest")
    for k in ("--store", "--unit-dir", "--llama-server", "--berth", "--out"):
        f.add_argument(k, required=True)
    f.add_argument("--base-port", type=int, required=True)
    f.add_argument("--names", default="a,b")
    f.add_argument("--idle-stop", default="2s")
    f.add_argument("--routed", action="store_true")
    a = p.parse_args(argv)
    return cmd_models(a) if a.cmd == "models" else cmd_manifest(a)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
