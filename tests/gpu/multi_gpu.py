#!/usr/bin/env python3
"""berth across two GPUs of one host (issue 43), without systemd: berth plans from what it
observes (NVML, ports, store, its state directory) with the unit table systemd would report
added, and this script carries each plan's steps out in its order as llama_switch.py does
(stop: SIGTERM and wait; start: `berth render`'s ExecStart=/Environment=, the process put into
/sys/fs/cgroup/system.slice/<unit> before its exec; wait-healthy: /health every 20 ms).

  tests/gpu/multi_gpu.py [CARRY] [--rehearse] [--models-only]   (multi_gpu.sh runs it)

  1. split: one model over GPUs 0 and 1 (split_mode: layer, args --tensor-split 1,1): berth's
     per-GPU claim (plan -o json) vs what NVML attributes to the process on each GPU;
  2. disjoint: left on GPU 0 (port P), right on GPU 1 (port P+1); left is switched (new context)
     while tests/prober/prober.py polls right: right must see no error;
  3. move: one service from GPU 0 to GPU 1 (the plan says start-first or stop-first, and why),
     then from [1] to [0, 1] with a claim that does not fit beside itself (stop-first): each
     plan's disruption estimate vs the prober's dark window;
  4. refused: big (GPUs 0, 1, gpu_memory OVER_GPU_MEMORY) with left to stop: GPU 0 has room,
     GPU 1 (right on it) has not: berth plan exits non-zero, nothing stopped (same PIDs).
OVER_GPU_MEMORY and BIG_GPU_MEMORY (multi_gpu.sh sets both to GPU 1's total less HEADROOM_MIB): a
claim that fits an empty GPU but not one beside a running service.
--rehearse: the CPU llama-server (LLAMA_BIN) and the fake NVML of two GPUs (FAKE_NVML_LIB, a
folder with libnvidia-ml.so.1 from tests/fake_nvml); the fake's processes are written from the
plan's claims, so the NVML figures of a rehearsal are not figures.
Figures to $OUT (or $WORK/out): figures.txt (mg_*=...), multi.log, mg-plan-*.txt, mg-*.json.
"""

import hashlib
import http.client
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REHEARSE = "--rehearse" in sys.argv or os.environ.get("REHEARSE") == "1"
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
CARRY = os.path.realpath(ARGS[0] if ARGS else "build-gpu")
WORK = os.path.realpath(os.environ.get("WORK") or os.path.join(ROOT, "build-gpu-llama"))
RES = os.environ.get("OUT") or os.path.join(WORK, "out")
LB = os.environ.get("LLAMA_BIN") or os.path.join(WORK, "llama", "bin")
PORT = int(os.environ.get("PORT", "18100"))
CTX, NP, NGL = (os.environ.get(k, d) for k, d in (("CTX", "4096"), ("NP", "4"), ("NGL", "99")))
SHAPE = os.environ.get("GGUF_FLAGS") or \
    "--embd 2048 --layers 16 --ff 5632 --heads 16 --kv 4 --ctx 4096"  # about 1.7 GB in F16
COMMIT = "3" * 40
LINEAGE = "43a5e1f0c0ffee0043a5e1f0c0ffee00"
STATE = os.path.join(WORK, "mg-state")
UNIT_DIR = os.path.join(WORK, "mg-units")
NVML_CONF = os.path.join(WORK, "mg-fake-nvml.conf")
GIB = 1 << 30
os.makedirs(RES, exist_ok=True)
LOG = open(os.path.join(RES, "multi.log"), "a")
SERVERS_LOG = open(os.path.join(RES, "mg-servers.log"), "a")


def say(*words):
    line = " ".join(str(w) for w in words)
    print(line, flush=True)
    LOG.write(line + "\n")
    LOG.flush()


def fig(name, value):
    say("%s=%s" % (name, value))
    with open(os.path.join(RES, "figures.txt"), "a") as f:
        f.write("%s=%s\n" % (name, value))


def berth(*args):
    lib = os.path.join(CARRY, "lib")
    env = dict(os.environ, LD_LIBRARY_PATH=lib, NCCL_NVLS_ENABLE="0")
    if REHEARSE:
        env["LD_LIBRARY_PATH"] = os.environ["FAKE_NVML_LIB"] + ":" + lib
        env["FAKE_NVML_CONFIG"] = NVML_CONF
    return subprocess.run([os.path.join(CARRY, "bin", "berth")] + list(args), env=env,
                          capture_output=True, text=True, timeout=120)


# --- the model, in a store laid out as berth's
SNAP = os.path.join(WORK, "store", "models--org--mg", "snapshots", COMMIT)
GGUF = os.path.join(SNAP, "model.gguf")


def write_model():
    done = os.path.join(WORK, "store", "models--org--mg", "gguf.done")
    if os.path.exists(done):
        return
    os.makedirs(SNAP, exist_ok=True)
    os.makedirs(os.path.join(WORK, "store", "models--org--mg", "refs"), exist_ok=True)
    with open(os.path.join(WORK, "store", "models--org--mg", "refs", "main"), "w") as f:
        f.write(COMMIT)
    py = "python3"
    if subprocess.run([py, "-c", "import numpy"], capture_output=True).returncode != 0:
        py = "/usr/bin/python3"
    t0 = time.time()
    subprocess.run([py, os.path.join(ROOT, "tests/real_engine/make_gguf.py"), "--llama-src",
                    os.path.join(WORK, "src"), "--out", GGUF, "--f16", "--seed", "3"] +
                   SHAPE.split(), check=True, timeout=300)
    fig("mg_gguf_write_s", "%.1f" % (time.time() - t0))
    open(done, "w").close()


# --- manifests: name -> (gpus, port, extra llama_server keys, service extra lines)
def manifest(tag, services):
    path = os.path.join(WORK, "mg-%s.yaml" % tag)
    lines = ["berth: 1", "host:", "  store: " + os.path.join(WORK, "store"),
             "  unit_dir: " + UNIT_DIR,
             "  executables: {llama-server: %s}" % os.path.join(LB, "llama-server"), "models:",
             "  mg: {source: hf://org/mg, revision: %s}" % COMMIT, "services:"]
    for name in sorted(services):
        s = services[name]
        lines += ["  %s:" % name, "    model: mg", "    engine: llama-server",
                  "    state: " + s.get("state", "running"),
                  "    gpus: [%s]" % ", ".join(str(g) for g in s["gpus"]),
                  "    port: %d" % s["port"], "    bind: 127.0.0.1",
                  "    env: {NCCL_NVLS_ENABLE: \"0\"}",
                  "    llama_server: {model_file: model.gguf, n_gpu_layers: %s, ctx_size: %s, "
                  "parallel: %s, alias: %s%s}" % (NGL, s.get("ctx", CTX), NP, name,
                                                  s.get("llama", "")),
                  "    health: {timeout: 3m, interval: 20ms}"] + s.get("lines", [])
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def render(path):
    r = berth("render", "-f", path)
    if r.returncode != 0:
        sys.exit("multi_gpu: berth render failed:\n" + r.stderr)
    parts = re.split(r"^# %s/(\S+)\n" % re.escape(UNIT_DIR), r.stdout, flags=re.M)
    return {parts[i]: parts[i + 1][:-1] for i in range(1, len(parts), 2)}


def unit_lines(text, key):
    out = []
    for line in text.splitlines():
        if line.startswith(key + "="):
            out += shlex.split(line[len(key) + 1:])
    return out


state = {"format_version": 1, "lineage": LINEAGE, "serial": 0, "units": [], "models": {},
         "applied": {}, "manifest": {"digest": "", "git_commit": ""}, "last_apply": "",
         "failures": {}, "start_times_ms": {}, "stop_times_ms": {}}
units = {}  # unit -> {"proc", "enabled", "port", "gpus", "claims": {gpu: bytes}}


def save_state():
    os.makedirs(STATE, exist_ok=True)
    with open(os.path.join(STATE, "state.json.tmp"), "w") as f:
        json.dump(state, f, indent=2)
    os.replace(os.path.join(STATE, "state.json.tmp"), os.path.join(STATE, "state.json"))


def keep(key, unit, ms):
    state[key][unit] = (state[key].get(unit, []) + [int(ms)])[-5:]
    save_state()


def running(u):
    p = units.get(u, {}).get("proc")
    return p is not None and p.poll() is None


def write_fake_nvml():
    """Rehearsal only: two 80 GB GPUs; each running unit holds what its plan claimed per GPU."""
    total = int(os.environ.get("FAKE_GPU_BYTES", str(80 * GIB)))
    lines = ["device %d GPU-43-%d %d 0 %d NVIDIA Fake" % (g, g, total, 512 << 20)
             for g in (0, 1)]
    for u, d in units.items():
        if running(u):
            lines += ["process %d %d %d" % (g, d["proc"].pid, b) for g, b in d["claims"].items()]
    with open(NVML_CONF, "w") as f:
        f.write("\n".join(lines) + "\n")


def observe(path, n):
    if REHEARSE:
        write_fake_nvml()
    r = berth("observe", "-f", path, "--state-dir", STATE, "-o", "json")
    if r.returncode != 0:
        sys.exit("multi_gpu: berth observe failed:\n" + r.stderr)
    o = json.loads(r.stdout)
    items = []
    for name, text in render(path).items():
        head = text.split("\n", 2)
        content = "%s\n%s\n# berth-lineage: %s\n%s" % (head[0], head[1], LINEAGE, head[2])
        u = units.get(name, {})
        up = running(name)
        if name not in state["units"]:
            state["units"].append(name)
        items.append({"name": name, "load_state": "loaded",
                      "active_state": "active" if up else "inactive",
                      "sub_state": "running" if up else "dead",
                      "fragment_path": os.path.join(UNIT_DIR, name), "managed": True,
                      "content_hash": hashlib.sha256(content.encode()).hexdigest(),
                      "spec_hash": u.get("spec_hash", head[1].split(": ", 1)[1]) if up
                      else head[1].split(": ", 1)[1],
                      "content": u.get("content", content) if up else content,
                      "main_pid": u["proc"].pid if up else 0, "need_daemon_reload": False,
                      "drop_in_paths": [],
                      "unit_file_state": "enabled" if u.get("enabled") else "disabled",
                      "invocation_id": "%032x" % u["proc"].pid if up else "", "n_restarts": 0,
                      "result": "success", "exec_main_status": 0,
                      "timeout_stop_usec": 120 * 1000000})
    o["units"] = {"known": True, "items": items}
    pids = {d["proc"].pid: n for n, d in units.items() if running(n)}
    for p in o["ports"].get("listening", []) + [q for d in o["gpus"].get("devices", [])
                                                 for q in d.get("processes", [])]:
        if not p.get("unit") and p.get("pid") in pids:
            p["unit"] = pids[p["pid"]]
    o["warnings"] = [w for w in o.get("warnings", []) if "systemd units not observed" not in w]
    saved = os.path.join(WORK, "mg-observed-%s.json" % n)
    with open(saved, "w") as f:
        json.dump(o, f, indent=1)
    return saved, o


def plan(path, n):
    obs, o = observe(path, n)
    text = berth("plan", "-f", path, "--observed", obs)
    with open(os.path.join(RES, "mg-plan-%s.txt" % n), "w") as f:
        f.write("$ berth plan -f %s\n%s%sexit status %d\n" % (
            os.path.basename(path), text.stdout, text.stderr, text.returncode))
    say("$ berth plan -f %s   (exit %d)" % (os.path.basename(path), text.returncode))
    say((text.stdout + text.stderr).rstrip())
    r = berth("plan", "-f", path, "--observed", obs, "-o", "json")
    try:
        p = json.loads(r.stdout)
    except ValueError:
        p = {"resource_changes": [], "blocked": True}
    p["_rc"] = text.returncode
    return p, o


def claims_of(p, unit, action="start"):
    """gpu -> bytes the plan's start (or restart) step of `unit` claims."""
    for a in p.get("resource_changes", []):
        if a.get("action") == action and a.get("unit") == unit:
            req = a.get("requires", {})
            return {int(g): b for g, b in req.get("gpu_bytes", {}).items()}, req
    return {}, {}


def start(unit, text):
    argv, env = unit_lines(text, "ExecStart"), unit_lines(text, "Environment")
    env = dict(os.environ, **dict(e.split("=", 1) for e in env))
    env["NCCL_NVLS_ENABLE"] = "0"
    cg = "/sys/fs/cgroup/system.slice/" + unit
    try:
        os.makedirs(cg, exist_ok=True)
    except OSError:
        cg = None

    def into_cgroup():
        if cg:
            with open(cg + "/cgroup.procs", "w") as f:
                f.write(str(os.getpid()))
    SERVERS_LOG.write("--- %s %s\n" % (unit, " ".join(argv)))
    SERVERS_LOG.flush()
    head = text.split("\n", 2)
    units[unit].update(proc=subprocess.Popen(argv, env=env, stdout=SERVERS_LOG,
                                             stderr=subprocess.STDOUT, preexec_fn=into_cgroup),
                       spec_hash=head[1].split(": ", 1)[1],
                       content="%s\n%s\n# berth-lineage: %s\n%s" % (head[0], head[1], LINEAGE,
                                                                    head[2]))


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def wait_healthy(unit, health):
    proc, port = units[unit]["proc"], units[unit]["port"]
    deadline = time.time() + health["timeout_ms"] / 1000.0
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("multi_gpu: %s exited with %s before its health gate" % (unit,
                                                                              proc.returncode))
        try:
            if get(port, health["path"])[0] == 200:
                return time.time()
        except OSError:
            pass
        time.sleep(0.02)
    sys.exit("multi_gpu: %s not healthy in time" % unit)


def stop(unit):
    proc = units[unit]["proc"]
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def apply(path, n, spec):
    """Plans `path`, carries it out; returns (plan, step -> (t0, t1, kind, unit))."""
    p, _ = plan(path, n)
    if p["_rc"] != 0:
        return p, None
    rendered = render(path)
    times, started = {}, {}
    for a in p["resource_changes"]:
        kind, unit, t0 = a["action"], a.get("unit", ""), time.time()
        if unit and unit not in units:
            units[unit] = {"proc": None, "enabled": False}
        if unit:
            s = spec.get(unit.replace(".service", ""), {})
            units[unit].update(port=s.get("port"), gpus=s.get("gpus", []))
        if kind == "stop":
            stop(unit)
            keep("stop_times_ms", unit, (time.time() - t0) * 1000)
        elif kind == "restart":  # systemd's restart: the stop, then the start
            stop(unit)
            keep("stop_times_ms", unit, (time.time() - t0) * 1000)
            units[unit]["claims"] = claims_of(p, unit, "restart")[0]
            start(unit, rendered[unit])
            started[unit] = time.time()
        elif kind == "start":
            units[unit]["claims"] = claims_of(p, unit)[0]
            start(unit, rendered[unit])
            started[unit] = t0
        elif kind == "wait-healthy":
            wait_healthy(unit, a["health"])
            keep("start_times_ms", unit, (time.time() - started[unit]) * 1000)
        elif kind in ("enable", "disable"):
            units[unit]["enabled"] = kind == "enable"
        elif kind == "prewarm":
            pass  # the file is small and cached: a prewarm reads nothing here
        times[a["step"]] = (t0, time.time(), kind, unit)
        say("step %d %-12s %-24s %7.3f s" % (a["step"], kind, a["address"], time.time() - t0))
    state["models"]["org/mg"] = [COMMIT]
    state["serial"] += 1
    save_state()
    return p, times


class Prober:
    def __init__(self, port, tag):
        self.out = os.path.join(RES, "mg-prober-%s.json" % tag)
        self.stop_file = os.path.join(WORK, "mg-prober-%s.stop" % tag)
        ready = os.path.join(WORK, "mg-prober-%s.ready" % tag)
        for f in (self.stop_file, ready):
            if os.path.exists(f):
                os.remove(f)
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "tests/prober/prober.py"), "--url",
             "http://127.0.0.1:%d" % port, "--path", "/health", "--interval-ms", "10",
             "--bucket-ms", "10", "--timeout", "5", "--stop-file", self.stop_file,
             "--ready-file", ready, "--out", self.out], stdout=LOG, stderr=LOG)
        for _ in range(500):
            if os.path.exists(ready):
                break
            time.sleep(0.01)
        time.sleep(0.3)

    def finish(self):
        time.sleep(0.5)
        open(self.stop_file, "w").close()
        self.proc.wait(30)
        with open(self.out) as f:
            return json.load(f)


def dark_ms(summary):
    buckets, ms = summary["timeline"]["buckets"], summary["timeline"]["bucket_ms"]
    best, last_ok, bad = 0, None, False
    for i, (ok, refused, failed) in enumerate(buckets):
        if ok:
            if bad and last_ok is not None:
                best = max(best, (i - last_ok - 1) * ms)
            last_ok, bad = i, False
        elif refused or failed:
            bad = True
    return best


def nvml_per_gpu():
    """pid -> {gpu: bytes} from nvidia-smi (the real card) or the fake's config."""
    out = {}
    if REHEARSE:
        for line in open(NVML_CONF):
            w = line.split()
            if w and w[0] == "process":
                out.setdefault(int(w[2]), {})[int(w[1])] = int(w[3])
        return out
    uuid = {}
    for line in subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
                               capture_output=True, text=True).stdout.splitlines():
        i, u = [x.strip() for x in line.split(",")]
        uuid[u] = int(i)
    for line in subprocess.run(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,used_memory",
                                "--format=csv,noheader,nounits"], capture_output=True,
                               text=True).stdout.splitlines():
        u, pid, mib = [x.strip() for x in line.split(",")]
        out.setdefault(int(pid), {})[uuid.get(u, -1)] = int(mib) << 20
    return out


def disruption(p):
    for d in p.get("disruption", []):
        return d
    return {}


def order_of(p, unit):
    """'start-first' or 'stop-first' from the order of unit's stop and start steps."""
    steps = {a["action"]: a["step"] for a in p["resource_changes"] if a.get("unit") == unit}
    if "restart" in steps:
        return "stop-first (restart)"
    if "stop" in steps and "start" in steps:
        return "stop-first" if steps["stop"] < steps["start"] else "start-first"
    return "none"


def main():
    if not os.path.exists(os.path.join(LB, "llama-server")):
        sys.exit("multi_gpu: no llama-server in %s" % LB)
    write_model()
    fig("mg_gguf_bytes", os.path.getsize(GGUF))
    if os.path.exists(STATE):
        for f in os.listdir(STATE):
            os.remove(os.path.join(STATE, f))
    save_state()
    split_llama = ", split_mode: layer"

    say("== 1. split: one model over GPUs 0 and 1")
    spec = {"split": {"gpus": [0, 1], "port": PORT, "llama": split_llama,
                      "lines": ["    args: [--tensor-split, \"1,1\"]"]}}
    p, _ = apply(manifest("1-split", spec), "1", spec)
    if p["_rc"] != 0:
        sys.exit("multi_gpu: the split plan is blocked (mg-plan-1.txt)")
    claims, req = claims_of(p, "split.service")
    fig("mg_split_claim_requires", json.dumps(req, separators=(",", ":")))
    time.sleep(1)
    _, o = observe(manifest("1-split", spec), "1-after")
    pid = units["split.service"]["proc"].pid
    per = nvml_per_gpu().get(pid, {})
    for g in (0, 1):
        fig("mg_split_gpu%d_claim_mib" % g, "%.1f" % (claims.get(g, 0) / 2 ** 20))
        fig("mg_split_gpu%d_nvml_mib" % g, "%.1f" % (per.get(g, 0) / 2 ** 20))
        seen = [q for d in o["gpus"].get("devices", []) if d.get("index") == g
                for q in d.get("processes", []) if q.get("pid") == pid]
        fig("mg_split_gpu%d_observe" % g, json.dumps(seen, separators=(",", ":")))
    with open(os.path.join(RES, "mg-observe-split.txt"), "w") as f:
        f.write(berth("observe", "-f", manifest("1-split", spec), "--state-dir", STATE).stdout)
    spec["split"]["state"] = "stopped"
    apply(manifest("1-stop", spec), "1-stop", spec)

    say("== 2. disjoint: left on GPU 0, right on GPU 1; left switched, right probed")
    spec = {"left": {"gpus": [0], "port": PORT}, "right": {"gpus": [1], "port": PORT + 1}}
    apply(manifest("2-up", spec), "2-up", spec)
    right_pid = units["right.service"]["proc"].pid
    prober = Prober(PORT + 1, "right")
    spec["left"]["ctx"] = str(int(CTX) * 2)
    p, _ = apply(manifest("2-switch", spec), "2-switch", spec)
    s = prober.finish()
    fig("mg_disjoint_left_order", order_of(p, "left.service"))
    fig("mg_disjoint_right_touched", any(a.get("unit") == "right.service"
                                         for a in p["resource_changes"]))
    fig("mg_disjoint_right_pid_same", units["right.service"]["proc"].pid == right_pid and
        running("right.service"))
    fig("mg_disjoint_right_prober_counts", json.dumps(s.get("counts"), separators=(",", ":")))

    say("== 4. refused: a claim over GPU 1's memory in the set [0, 1], nothing stops")
    over = {n: dict(v) for n, v in spec.items()}
    over["left"]["state"] = "stopped"  # frees GPU 0: GPU 1 alone is short, beside right
    over["big"] = {"gpus": [0, 1], "port": PORT + 2,
                   "lines": ["    gpu_memory: %s" % os.environ["OVER_GPU_MEMORY"]]}
    pids = {u: units[u]["proc"].pid for u in ("left.service", "right.service")}
    p, _ = plan(manifest("4-over", over), "4-over")  # planned only: a plan that ran would stop left
    fig("mg_refused_plan_exit", p["_rc"])
    fig("mg_refused_nothing_stopped", all(running(u) and units[u]["proc"].pid == pid
                                          for u, pid in pids.items()))

    say("== 3. move: mv0 (GPU 0) replaced by mv1 (GPU 1) on its port, then mv1 by mv01 (GPUs 0, 1)")
    spec = {"left": {"gpus": [0], "port": PORT, "state": "stopped"},
            "right": {"gpus": [1], "port": PORT + 1, "state": "stopped"}}
    apply(manifest("3-clear", spec), "3-clear", spec)
    big = ["    gpu_memory: %s" % os.environ["BIG_GPU_MEMORY"]]
    # Each move once unprobed and back, so that state.json holds the stop and the start the
    # plan's estimate is made of, then again with the prober.
    moves = (("3-a", {"mv0": "running"}, None),
             ("3-b0", {"mv0": "stopped", "mv1": "running"}, None),
             ("3-a0", {"mv0": "running", "mv1": "stopped"}, None),
             ("3-b", {"mv0": "stopped", "mv1": "running"}, "mv1"),
             ("3-c0", {"mv1": "stopped", "mv01": "running"}, None),
             ("3-b1", {"mv1": "running", "mv01": "stopped"}, None),
             ("3-c", {"mv1": "stopped", "mv01": "running"}, "mv01"))
    gpus = {"mv0": [0], "mv1": [1], "mv01": [0, 1]}
    for tag, states, new_one in moves:
        # mv01 claims BIG_GPU_MEMORY on each GPU: with mv1 on GPU 1 beside it, GPU 1 is short
        spec = {n: {"gpus": gpus[n], "port": PORT, "state": st,
                    "lines": big if n == "mv01" else []} for n, st in states.items()}
        if new_one is None:
            apply(manifest(tag, spec), tag, spec)
            continue
        if tag == "3-b":  # what start-first would say: blocked, and why
            sf = {n: dict(v, lines=v["lines"] + (["    strategy: start-first"] if n == new_one
                                                  else [])) for n, v in spec.items()}
            p, _ = plan(manifest(tag + "-start-first", sf), tag + "-start-first")
            fig("mg_move_%s_start_first_plan_exit" % tag, p["_rc"])
            text = open(os.path.join(RES, "mg-plan-%s-start-first.txt" % tag)).read()
            fig("mg_move_%s_start_first_why" % tag, json.dumps(
                [l.strip() for l in text.splitlines() if "strategy:" in l]))
        prober = Prober(PORT, tag)
        p, times = apply(manifest(tag, spec), tag, spec)
        s = prober.finish()
        d = disruption(p)
        sw = [w for w in p.get("switches", []) if w.get("unit") == new_one + ".service"]
        fig("mg_move_%s_mode" % tag, sw[0].get("mode") if sw else "none")
        text = open(os.path.join(RES, "mg-plan-%s.txt" % tag)).read()
        fig("mg_move_%s_why" % tag, json.dumps([l.strip() for l in text.splitlines()
                                                if l.startswith(("switch ", "together",
                                                                 "disruption"))]))
        fig("mg_move_%s_plan_expected_ms" % tag, d.get("expected_ms"))
        if times and d.get("from_step") in times and d.get("until_step") in times:
            fig("mg_move_%s_dark_steps_ms" % tag, int(
                (times[d["until_step"]][1] - times[d["from_step"]][0]) * 1000))
        fig("mg_move_%s_prober_dark_ms" % tag, dark_ms(s))
        fig("mg_move_%s_prober_counts" % tag, json.dumps(s.get("counts"), separators=(",", ":")))
    with open(os.path.join(RES, "mg-state.json"), "w") as f:
        json.dump(state, f, indent=2)


def cleanup():
    for unit, u in units.items():
        if running(unit):
            u["proc"].send_signal(signal.SIGTERM)
            try:
                u["proc"].wait(60)
            except subprocess.TimeoutExpired:
                u["proc"].kill()
        try:
            os.rmdir("/sys/fs/cgroup/system.slice/" + unit)
        except OSError:
            pass


if __name__ == "__main__":
    if "--models-only" in sys.argv:
        sys.exit(write_model())
    try:
        main()
    finally:
        cleanup()
