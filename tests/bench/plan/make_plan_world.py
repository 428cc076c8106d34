#!/usr/bin/python3
"""make_plan_world.py - the inputs of the plan-scaling benchmark (see README.md beside this file).

  make_plan_world.py --berth PATH --sizes 100,1000 --out DIR [--noop 1000]

For each N it writes DIR/nN/berth.yaml (N models and N vLLM services svc-NNNNNN) and
DIR/nN/observed.json, a saved observation (`berth observe -o json`'s format, read by
`berth plan --observed`) in which half the services are converged:

- even i: the model's commit is complete in the store and recorded in berth's state, the unit is
  written exactly as berth renders it (stamped with the state's lineage), active, enabled, its
  process holds its GPU share and listens on its port. Every fourth service also has two older
  revisions berth downloaded (one kept for a rollback, one removed: host.keep_revisions is 1).
- odd i: nothing (a download, a unit write, an enable, a start, a health gate).
- N/20 repos berth downloaded that no model names any more (removals).

With --noop N, DIR/noopN/ holds the same manifest and an observation where all N are converged
and nothing else is there: its plan is empty.

The unit text is berth's own: one `berth render` of a 12-service manifest, turned into a
template by substituting each service's name, model, commit, port and GPU; every one of the 12
must come back byte-identical from the template, or the script fails. Python 3 stdlib only.
"""

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys

STORE = "/var/lib/berth-bench/models"
UNIT_DIR = "/etc/systemd/system"
VLLM = "/opt/vllm/bin/vllm"
LINEAGE = "5eed0000b0a7c4f1e2d3c4b5a6978812"
GPUS = 8
GPU_TOTAL = 150754820096
UTIL = 0.0005  # a small share: 1,000 services on 8 GPUs use 6.25 % of each
MODEL_BYTES = 1000000000
K_TEMPLATE = 12


def commit_of(i, gen=0):
    return hashlib.sha1(b"berth-plan-bench-%d-%d" % (i, gen)).hexdigest()


def name(i):
    return "svc-%06d" % i


def model(i):
    return "model-%06d" % i


def repo(i):
    return "bench/model-%06d" % i


def port(i):
    return 20000 + i


def gpu(i):
    return i % GPUS


def claim():
    return int(UTIL * GPU_TOTAL)


def manifest(n):
    out = ["berth: 1", "host:", "  store: %s" % STORE, "  unit_dir: %s" % UNIT_DIR,
           "  executables: {vllm: %s}" % VLLM, "models:"]
    for i in range(n):
        out.append("  %s: {source: hf://%s, revision: %s, size: 1GB}" % (model(i), repo(i),
                                                                         commit_of(i)))
    out.append("services:")
    for i in range(n):
        out += ["  %s:" % name(i),
                "    model: %s" % model(i),
                "    engine: vllm",
                "    gpus: [%d]" % gpu(i),
                "    port: %d" % port(i),
                "    bind: 127.0.0.1",
                "    vllm: {gpu_memory_utilization: %s, max_model_len: 2048}" % UTIL,
                "    health: {timeout: 120s, interval: 1s}"]
    return "\n".join(out) + "\n"


def revision(commit, complete=True):
    return {"commit": commit, "refs": [], "complete": complete, "bytes_present": MODEL_BYTES,
            "bytes_total": MODEL_BYTES}


def observation(n, units, converged, gone, stale):
    """`units`: index -> unit text as berth renders it; `converged(i)`: whether i runs."""
    repos, items, listening, models = [], [], [], {}
    procs = [[] for _ in range(GPUS)]
    for i in range(n):
        if not converged(i):
            continue
        old = [commit_of(i, 2), commit_of(i, 1)] if stale(i) else []
        repos.append({"repo_id": repo(i),
                      "revisions": [revision(c) for c in old] + [revision(commit_of(i))]})
        models[repo(i)] = old + [commit_of(i)]
        body = units[i]
        text = stamp(body)
        unit = name(i) + ".service"
        pid = 100000 + i
        items.append({
            "name": unit, "load_state": "loaded", "active_state": "active",
            "sub_state": "running", "fragment_path": "%s/%s" % (UNIT_DIR, unit),
            "content_hash": hashlib.sha256(text.encode()).hexdigest(), "managed": True,
            "spec_hash": spec_hash(body), "content": text, "main_pid": pid,
            "need_daemon_reload": False, "drop_in_paths": [], "unit_file_state": "enabled",
            "invocation_id": hashlib.md5(unit.encode()).hexdigest(), "n_restarts": 0,
            "result": "success", "exec_main_status": 0})
        listening.append({"port": port(i), "address": "127.0.0.1", "pid": pid,
                          "process": "vllm", "unit": unit})
        procs[gpu(i)].append({"pid": pid, "used_bytes": claim(), "unit": unit,
                              "name": "python3"})
    for g in range(gone):
        r = "bench/gone-%06d" % g
        repos.append({"repo_id": r, "revisions": [revision(commit_of(10**7 + g))]})
        models[r] = [commit_of(10**7 + g)]
    devices = [{"index": g, "uuid": "GPU-%08d-0000-0000-0000-000000000000" % g,
                "name": "NVIDIA H200", "memory_total": GPU_TOTAL,
                "memory_used": sum(p["used_bytes"] for p in procs[g]) + 500 * 2**20,
                "processes": procs[g]} for g in range(GPUS)]
    listening.append({"port": 22, "address": "0.0.0.0", "pid": 812, "process": "sshd",
                      "unit": "ssh.service"})
    return {
        "format_version": 1, "hostname": "bench-host", "observed_at": "2026-12-01T00:00:00Z",
        "store": {"path": STORE, "exists": True, "total_bytes": 2 * 10**16,
                  "free_bytes": 10**16, "repos": repos},
        "gpus": {"known": True, "error": "", "devices": devices},
        "units": {"known": True, "items": items},
        "ports": {"known": True, "listening": listening},
        "hub": [],
        "berth_state": {"serial": 7, "lineage": LINEAGE,
                        "units": [u["name"] for u in items], "models": models},
    }


# --- the unit template --------------------------------------------------------------------------

HEADER = re.compile(r"^# Managed by berth .*\n# berth-spec-hash: [0-9a-f]{64}\n")


def body_of(content):
    m = HEADER.match(content)
    if not m:
        sys.exit("make_plan_world.py: berth render's unit has no header as expected:\n" + content)
    return content[m.end():], m.group(0)


def spec_hash(body):
    return hashlib.sha256(body.encode()).hexdigest()


HEAD = {}  # the first header line ("# Managed by berth VERSION. ...")


def stamp(body):
    return "%s# berth-spec-hash: %s\n# berth-lineage: %s\n%s" % (HEAD["line"], spec_hash(body),
                                                                  LINEAGE, body)


def substitutions(i):
    return [(commit_of(i), "@COMMIT@"), (repo(i).replace("/", "--"), "@REPOPATH@"),
            (repo(i), "@REPO@"), (model(i), "@MODEL@"), (name(i), "@NAME@"),
            (str(port(i)), "@PORT@")]


def fill(template, i):
    out = template
    for value, key in substitutions(i):
        out = out.replace(key, value)
    return out.replace("@GPU@", str(gpu(i)))


def make_template(berth, work):
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "berth.yaml"), "w") as f:
        f.write(manifest(K_TEMPLATE))
    obs = observation(K_TEMPLATE, {}, lambda i: False, 0, lambda i: False)
    with open(os.path.join(work, "observed.json"), "w") as f:
        json.dump(obs, f)
    out = subprocess.run([berth, "render", "-f", os.path.join(work, "berth.yaml"), "--observed",
                          os.path.join(work, "observed.json")], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("make_plan_world.py: berth render failed:\n" + out.stderr)
    parts = re.split(r"^# %s/(svc-\d{6})\.service\n" % re.escape(UNIT_DIR), out.stdout,
                     flags=re.M)
    rendered = {}
    for k in range(1, len(parts), 2):
        content = parts[k + 1][:-1]  # render adds a newline after each unit
        body, header = body_of(content)
        HEAD["line"] = header.split("\n")[0] + "\n"
        rendered[int(parts[k][4:])] = body
    if sorted(rendered) != list(range(K_TEMPLATE)):
        sys.exit("make_plan_world.py: berth render gave units %s" % sorted(rendered))
    template = rendered[0]
    for value, key in substitutions(0):
        template = template.replace(value, key)
    template = re.sub(r"CUDA_VISIBLE_DEVICES=0\b", "CUDA_VISIBLE_DEVICES=@GPU@", template)
    for i in range(K_TEMPLATE):
        if fill(template, i) != rendered[i]:
            sys.exit("make_plan_world.py: svc %d does not fit the template:\n%s\n---\n%s"
                     % (i, fill(template, i), rendered[i]))
    return template


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--berth", required=True)
    p.add_argument("--sizes", default="100,1000")
    p.add_argument("--noop", type=int, default=1000, help="size of the no-op world (0: none)")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    template = make_template(a.berth, os.path.join(a.out, "template"))
    worlds = [("n%d" % n, n, False) for n in map(int, a.sizes.split(","))]
    if a.noop:
        worlds.append(("noop%d" % a.noop, a.noop, True))
    for folder, n, noop in worlds:
        d = os.path.join(a.out, folder)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "berth.yaml"), "w") as f:
            f.write(manifest(n))
        units = {i: fill(template, i) for i in range(n)}
        if noop:
            obs = observation(n, units, lambda i: True, 0, lambda i: False)
        else:
            obs = observation(n, units, lambda i: i % 2 == 0, n // 20, lambda i: i % 4 == 0)
        with open(os.path.join(d, "observed.json"), "w") as f:
            json.dump(obs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
