#!/usr/bin/env python3
"""The dark window of a stop-first switch between two llama-servers on one port (issue 42), on
the GPU machine, which has no systemd: berth plans each switch from what it observes there (the
real GPU, ports, store and memory, and its state directory) with the unit table systemd would
report added, and this script carries the plan's steps out in its order as berth's executor does:

  prewarm       page_cache_tool prewarm (berth's own Prewarm) of the step's GGUF file
  stop          SIGTERM to the unit's process, then wait for its exit (SIGKILL after the unit's
                120 s stop timeout); the time is kept as berth keeps it (state.json stop_times_ms)
  start         the unit's ExecStart= and Environment= as `berth render` writes them, the process
                in /sys/fs/cgroup/system.slice/<unit> from before its exec, as systemd puts it
  wait-healthy  GET /health every 20 ms (the manifest's interval) until 200, then /v1/models
                lists the alias; start to here is kept as state.json start_times_ms
  enable, disable, write-unit, daemon-reload: what systemd would do; only the unit table changes

  tests/gpu/llama_switch.py [CARRY] [--models-only]
      CARRY: what llama_carry.sh gathered (build-gpu); --models-only: write chat-b's GGUF and
      exit (in the background while llama_gpu.sh builds llama.cpp)

It runs after tests/gpu/llama_gpu.sh on the same machine (its llama.cpp build and 8B GGUF under
$WORK): a second GGUF of the same shape (another seed) is written for service chat-b. Then, on
port $PORT, with both units berth's (their files as berth renders them):
  1. apply switch-a.yaml: chat-a starts (nothing runs yet);
  2. apply switch-b.yaml: prewarm chat-b's file (evicted first), stop chat-a, start chat-b;
  3. apply switch-a.yaml: the way back, chat-a's file evicted first;
  4. berth plan switch-b.yaml estimates the dark window from the stop of chat-a and the start of
     chat-b that state.json now holds; the switch is carried out again with tests/prober/
     prober.py polling /health every 10 ms on new connections: the measured dark window.
Figures go to $OUT (or $WORK/out): figures.txt (switch_*=...), switch.log, switch-plan-N.txt,
switch-prober.json, switch-state.json, switch-servers.log.
Knobs (environment), as llama_gpu.sh's: WORK, LLAMA_BIN, GGUF_FLAGS, CTX, NP, NGL, PORT.
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
ARGS = [a for a in sys.argv[1:] if a != "--models-only"]
CARRY = os.path.realpath(ARGS[0] if ARGS else "build-gpu")
WORK = os.path.realpath(os.environ.get("WORK") or os.path.join(ROOT, "build-gpu-llama"))
RES = os.environ.get("OUT") or os.path.join(WORK, "out")
LB = os.environ.get("LLAMA_BIN") or os.path.join(WORK, "llama", "bin")
PORT = int(os.environ.get("PORT", "18080"))
CTX, NP, NGL = (os.environ.get(k, d) for k, d in (("CTX", "8192"), ("NP", "16"), ("NGL", "99")))
SHAPE = os.environ.get("GGUF_FLAGS") or "--embd 4096 --layers 32 --ff 14336 --heads 32 --kv 8 " \
    "--ctx 8192"
COMMITS = {"a": "1" * 40, "b": "2" * 40}
REPOS = {"a": "m8b", "b": "m8b-b"}  # chat-a serves llama_gpu.sh's model, chat-b a second one
LINEAGE = "42a5e1f0c0ffee0042a5e1f0c0ffee00"
STOP_TIMEOUT_S = 120  # TimeoutStopSec=2min: the unit's stop timeout as berth renders it
STATE = os.path.join(WORK, "switch-state")
UNIT_DIR = os.path.join(WORK, "switch-units")
TOOL = os.path.join(CARRY, "bin", "page_cache_tool")
os.makedirs(RES, exist_ok=True)
LOG = open(os.path.join(RES, "switch.log"), "a")
SERVERS_LOG = open(os.path.join(RES, "switch-servers.log"), "a")


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
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(CARRY, "lib"))
    return subprocess.run([os.path.join(CARRY, "bin", "berth")] + list(args), env=env,
                          capture_output=True, text=True, timeout=300)


def snapshot(k):
    return os.path.join(WORK, "store", "models--org--" + REPOS[k], "snapshots", COMMITS[k])


def gguf(k):
    return os.path.join(snapshot(k), "model.gguf")


def numpy_python():
    for py in ("python3", "/usr/bin/python3"):
        if subprocess.run([py, "-c", "import numpy"], capture_output=True).returncode == 0:
            return py
    sys.exit("llama_switch: no python3 with numpy for make_gguf.py")


def write_models(which):
    """The models in the store laid out as berth's (llama_gpu.sh's m8b is kept, once written)."""
    for k, seed in (("a", "1"), ("b", "2")):
        if k not in which:
            continue
        repo = os.path.join(WORK, "store", "models--org--" + REPOS[k])
        done = os.path.join(repo, "gguf.done")
        if os.path.exists(done) or (k == "a" and os.path.exists(
                os.path.join(WORK, "store", "gguf.done"))):
            continue
        os.makedirs(snapshot(k), exist_ok=True)
        os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
        with open(os.path.join(repo, "refs", "main"), "w") as f:
            f.write(COMMITS[k])
        t0 = time.time()
        subprocess.run([numpy_python(), os.path.join(ROOT, "tests/real_engine/make_gguf.py"),
                        "--llama-src", os.path.join(WORK, "src"), "--out", gguf(k), "--f16",
                        "--seed", seed] + SHAPE.split(), check=True, timeout=400)
        fig("switch_gguf_%s_write_s" % k, "%.1f" % (time.time() - t0))
        open(done, "w").close()


def manifest(running):
    path = os.path.join(WORK, "switch-%s.yaml" % running)
    lines = ["berth: 1", "host:", "  store: " + os.path.join(WORK, "store"),
             "  unit_dir: " + UNIT_DIR,
             "  executables: {llama-server: %s}" % os.path.join(LB, "llama-server"), "models:"]
    lines += ["  %s: {source: hf://org/%s, revision: %s}" % (REPOS[k], REPOS[k], COMMITS[k])
              for k in "ab"]
    lines.append("services:")
    for k in "ab":
        lines += ["  chat-%s:" % k, "    model: " + REPOS[k], "    engine: llama-server",
                  "    state: " + ("running" if k == running else "stopped"), "    gpus: [0]",
                  "    port: %d" % PORT, "    bind: 127.0.0.1",
                  "    llama_server: {model_file: model.gguf, n_gpu_layers: %s, ctx_size: %s, "
                  "parallel: %s, alias: %s}" % (NGL, CTX, NP, REPOS[k]),
                  "    health: {timeout: 5m, interval: 20ms}"]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def render(path):
    """unit -> its file as berth renders it."""
    r = berth("render", "-f", path)
    if r.returncode != 0:
        sys.exit("llama_switch: berth render failed:\n" + r.stderr)
    parts = re.split(r"^# %s/(\S+)\n" % re.escape(UNIT_DIR), r.stdout, flags=re.M)
    return {parts[i]: parts[i + 1][:-1] for i in range(1, len(parts), 2)}


def unit_lines(text, key):
    out = []
    for line in text.splitlines():
        if line.startswith(key + "="):
            out += shlex.split(line[len(key) + 1:])
    return out


# berth's records and the unit table systemd would keep.
state = {"format_version": 1, "lineage": LINEAGE, "serial": 0,
         "units": ["chat-a.service", "chat-b.service"], "models": {},
         "applied": {}, "manifest": {"digest": "", "git_commit": ""}, "last_apply": "",
         "failures": {}, "start_times_ms": {}, "stop_times_ms": {}}
units = {}  # unit -> {"proc": Popen or None, "enabled": bool}


def save_state():
    os.makedirs(STATE, exist_ok=True)
    with open(os.path.join(STATE, "state.json.tmp"), "w") as f:
        json.dump(state, f, indent=2)
    os.replace(os.path.join(STATE, "state.json.tmp"), os.path.join(STATE, "state.json"))


def keep(key, unit, ms):
    state[key][unit] = (state[key].get(unit, []) + [int(ms)])[-5:]  # kStartTimesKept
    save_state()


def observe(path, n):
    """berth observe of this host, with the unit table as systemd would report it."""
    r = berth("observe", "-f", path, "--state-dir", STATE, "-o", "json")
    if r.returncode != 0:
        sys.exit("llama_switch: berth observe failed:\n" + r.stderr)
    o = json.loads(r.stdout)
    items = []
    for name, text in render(path).items():
        head = text.split("\n", 2)  # "# Managed by berth", "# berth-spec-hash: H", the unit
        content = "%s\n%s\n# berth-lineage: %s\n%s" % (head[0], head[1], LINEAGE, head[2])
        u = units.get(name, {"proc": None, "enabled": False})
        up = u["proc"] is not None and u["proc"].poll() is None
        items.append({"name": name, "load_state": "loaded",
                      "active_state": "active" if up else "inactive",
                      "sub_state": "running" if up else "dead",
                      "fragment_path": os.path.join(UNIT_DIR, name), "managed": True,
                      "content_hash": hashlib.sha256(content.encode()).hexdigest(),
                      "spec_hash": head[1].split(": ", 1)[1], "content": content,
                      "main_pid": u["proc"].pid if up else 0, "need_daemon_reload": False,
                      "drop_in_paths": [],
                      "unit_file_state": "enabled" if u["enabled"] else "disabled",
                      "invocation_id": "%032x" % u["proc"].pid if up else "", "n_restarts": 0,
                      "result": "success", "exec_main_status": 0,
                      "timeout_stop_usec": STOP_TIMEOUT_S * 1000000})
    o["units"] = {"known": True, "items": items}
    # Where no cgroup2 named the unit (a machine other than the GPU one), what systemd's cgroup
    # would have: the process's unit.
    pids = {u["proc"].pid: n for n, u in units.items()
            if u.get("proc") and u["proc"].poll() is None}
    for p in o["ports"].get("listening", []) + [q for d in o["gpus"].get("devices", [])
                                                 for q in d.get("processes", [])]:
        if not p.get("unit") and p.get("pid") in pids:
            p["unit"] = pids[p["pid"]]
            say("(pid %d given unit %s: no cgroup2 here)" % (p["pid"], p["unit"]))
    o["warnings"] = [w for w in o.get("warnings", []) if "systemd units not observed" not in w]
    saved = os.path.join(WORK, "switch-observed-%d.json" % n)
    with open(saved, "w") as f:
        json.dump(o, f, indent=1)
    return saved


def plan(path, n):
    obs = observe(path, n)
    text = berth("plan", "-f", path, "--observed", obs)
    with open(os.path.join(RES, "switch-plan-%d.txt" % n), "w") as f:
        f.write("$ berth plan -f %s --observed %s\n%s%s" % (os.path.basename(path),
                                                           os.path.basename(obs), text.stdout,
                                                           text.stderr))
    say(text.stdout.rstrip())
    r = berth("plan", "-f", path, "--observed", obs, "-o", "json")
    if r.returncode != 0:
        sys.exit("llama_switch: berth plan failed:\n" + r.stderr)
    return json.loads(r.stdout)


def cgroup_of(unit):
    return "/sys/fs/cgroup/system.slice/" + unit


def start(unit, text):
    argv, env = unit_lines(text, "ExecStart"), unit_lines(text, "Environment")
    env = dict(os.environ, **dict(e.split("=", 1) for e in env))
    cg = cgroup_of(unit)
    try:
        os.makedirs(cg, exist_ok=True)
    except OSError:
        cg = None  # no writable cgroup2 (not the GPU machine): attribution is not the point here

    def into_cgroup():
        if cg:
            with open(cg + "/cgroup.procs", "w") as f:
                f.write(str(os.getpid()))
    SERVERS_LOG.write("--- %s\n" % unit)
    SERVERS_LOG.flush()
    units.setdefault(unit, {"enabled": False})["proc"] = subprocess.Popen(
        argv, env=env, stdout=SERVERS_LOG, stderr=subprocess.STDOUT, preexec_fn=into_cgroup)


def get(path):
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=1)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def wait_healthy(unit, health):
    """/health 200 then /v1/models naming the alias; returns the time /health said 200."""
    proc = units[unit]["proc"]
    deadline = time.time() + health["timeout_ms"] / 1000.0
    healthy = None
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("llama_switch: %s exited with %s before its health gate" % (unit,
                                                                                proc.returncode))
        try:
            if healthy is None and get(health["path"])[0] == 200:
                healthy = time.time()
            if healthy is not None:
                status, body = get("/v1/models")
                ids = [m.get("id") for m in json.loads(body).get("data", [])]
                if status == 200 and health.get("served_model_name", "") in ids + [""]:
                    return healthy
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    sys.exit("llama_switch: %s not healthy within %d ms" % (unit, health["timeout_ms"]))


def stop(unit):
    proc = units[unit]["proc"]
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()  # KillMode=mixed: SIGKILL to what is left
        proc.wait()
        say("(%s killed after its %d s stop timeout)" % (unit, STOP_TIMEOUT_S))


def apply(path, n):
    """Plans `path` and carries the plan out step by step; returns step -> (begin, end, what)."""
    p = plan(path, n)
    rendered = render(path)
    times = {}
    started = {}
    for a in p["resource_changes"]:
        kind, unit, t0 = a["action"], a.get("unit", ""), time.time()
        what = ""
        if kind == "prewarm":
            pw = a["prewarm"]
            subprocess.run([TOOL, "prewarm", os.path.join(pw["snapshot"], pw["file"])],
                           check=True, timeout=300)
            what = "%.2f GB" % (pw["bytes"] / 1e9)
        elif kind == "stop":
            stop(unit)
            keep("stop_times_ms", unit, (time.time() - t0) * 1000)
        elif kind == "start":
            start(unit, rendered[unit])
            started[unit] = t0
        elif kind == "wait-healthy":
            what = "/health 200 after %.2f s" % (wait_healthy(unit, a["health"]) - started[unit])
            keep("start_times_ms", unit, (time.time() - started[unit]) * 1000)
        elif kind in ("enable", "disable"):
            units.setdefault(unit, {"proc": None})["enabled"] = kind == "enable"
        elif kind in ("write-unit", "daemon-reload", "keep"):
            pass  # the unit table is rendered afresh at each observation
        else:
            say("llama_switch: step %d (%s %s) is not carried out here" % (a["step"], kind,
                                                                          a["address"]))
        times[a["step"]] = (t0, time.time(), kind, unit)
        say("step %d %-12s %-22s %7.3f s %s" % (a["step"], kind, a["address"], time.time() - t0,
                                                  what))
    for k in "ab":
        state["models"]["org/" + REPOS[k]] = [COMMITS[k]]
    state["serial"] += 1
    save_state()
    return p, times


def evict(k):
    os.sync()
    say(subprocess.run([TOOL, "evict", gguf(k)], capture_output=True, text=True).stdout.strip())
    say(subprocess.run([TOOL, "residency", gguf(k)], capture_output=True, text=True).stdout
        .strip())


def dark_from_prober(summary):
    """The longest run of 10 ms buckets with requests and none ok, between two ok ones: (ms,
    refused, failed) of the run."""
    buckets = summary["timeline"]["buckets"]
    ms = summary["timeline"]["bucket_ms"]
    best, run, last_ok = (0, 0, 0), None, None
    for i, (ok, refused, failed) in enumerate(buckets):
        if ok:
            if run is not None and last_ok is not None:
                best = max(best, ((i - last_ok - 1) * ms, run[0], run[1]))
            run, last_ok = None, i
        elif refused or failed:
            run = [refused, failed] if run is None else [run[0] + refused, run[1] + failed]
    return best


def main():
    if not os.path.exists(os.path.join(LB, "llama-server")):
        sys.exit("llama_switch: no llama-server in %s (run tests/gpu/llama_gpu.sh first)" % LB)
    write_models("ab")
    for k in "ab":
        fig("switch_gguf_%s_bytes" % k, os.path.getsize(gguf(k)))
    a, b = manifest("a"), manifest("b")
    if os.path.exists(STATE):
        for f in os.listdir(STATE):
            os.remove(os.path.join(STATE, f))
    save_state()
    say("== 1. apply switch-a.yaml: chat-a starts")
    apply(a, 1)
    say("== 2. apply switch-b.yaml: chat-b's file evicted first")
    evict("b")
    apply(b, 2)
    say("== 3. apply switch-a.yaml: back, chat-a's file evicted first")
    evict("a")
    apply(a, 3)
    say("== 4. berth plan switch-b.yaml, then the switch with the prober")
    evict("b")
    prober_out = os.path.join(RES, "switch-prober.json")
    stop_file, ready = os.path.join(WORK, "switch-prober.stop"), os.path.join(WORK,
                                                                             "switch-prober.ready")
    for f in (stop_file, ready):
        if os.path.exists(f):
            os.remove(f)
    prober = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests/prober/prober.py"),
                               "--url", "http://127.0.0.1:%d" % PORT, "--path", "/health",
                               "--interval-ms", "10", "--bucket-ms", "10", "--timeout", "5",
                               "--stop-file", stop_file, "--ready-file", ready, "--out",
                               prober_out], stdout=LOG, stderr=LOG)
    for _ in range(500):
        if os.path.exists(ready):
            break
        time.sleep(0.01)
    time.sleep(0.5)
    p, times = apply(b, 4)
    time.sleep(1)
    open(stop_file, "w").close()
    prober.wait(30)
    for d in p.get("disruption", []):
        fig("switch_plan_expected_ms", d.get("expected_ms"))
        fig("switch_plan_worst_ms", d.get("worst_ms"))
        fig("switch_plan_samples", json.dumps({"stop": d.get("stop"), "start": {
            d.get("samples_unit"): d.get("samples")}}, separators=(",", ":")))
        begin = times[d["from_step"]][0]
        fig("switch_dark_steps_ms", int((times[d["until_step"]][1] - begin) * 1000))
    for step, (t0, t1, kind, unit) in sorted(times.items()):
        fig("switch_step%d_%s_ms" % (step, kind.replace("-", "_")), int((t1 - t0) * 1000))
    fig("switch_state_stop_times_ms", json.dumps(state["stop_times_ms"], separators=(",", ":")))
    fig("switch_state_start_times_ms", json.dumps(state["start_times_ms"], separators=(",", ":")))
    with open(prober_out) as f:
        summary = json.load(f)
    dark_ms, refused, failed = dark_from_prober(summary)
    fig("switch_prober_dark_ms", int(dark_ms))
    fig("switch_prober_dark_refused", refused)
    fig("switch_prober_dark_503_or_other", failed)
    fig("switch_prober_counts", json.dumps(summary.get("counts"), separators=(",", ":")))
    with open(os.path.join(RES, "switch-state.json"), "w") as f:
        json.dump(state, f, indent=2)


def cleanup():
    for unit, u in units.items():
        proc = u.get("proc")
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for _ in range(50):
            try:
                os.rmdir(cgroup_of(unit))
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)


if __name__ == "__main__":
    if "--models-only" in sys.argv:
        sys.exit(write_models("b"))
    try:
        main()
    finally:
        cleanup()
