#!/usr/bin/python3
"""measure.py - the on-demand benchmark's rounds (see README.md beside this file). Runs inside
the sandbox (run.sh: `sdsandbox.sh exec`), so that `systemctl` is the sandbox's systemd and the
manual alternative is timed as an operator's shell would run it.

  measure.py --base-port P --rounds N --out FILE.jsonl [--names a,b] [--warm-requests 3] [--routed]

Per round (round 0 is a warm-up, written with "warmup": true and left out of the figures;
berth's part first in even rounds, the manual part first in odd ones):
  berth_cold   svc-a idle (its server unit inactive, checked): a request to svc-a's port
  berth_warm   the same port again, the server now up (through the socket and the proxy)
  berth_swap   svc-a up, svc-b idle (checked): a request to svc-b's port (a stops, b starts)
  then svc-b's idle stop is waited for (the time from the last answer to its unit inactive is
  idle_stop_s), and the operator's alternative, with the plain units of the same servers:
  manual_cold  systemctl start plain-a; GET /health every 10 ms until 200; the request
  plain_warm   the request again, straight to the running server (the always-on baseline)
  manual_swap  systemctl stop plain-a; systemctl start plain-b; /health every 10 ms; the request
  and systemctl stop plain-b. The request's own TTFT of a manual start is ttft_ms - healthy_ms.
Each request: POST /v1/completions, streamed, a 1-token prompt, max_tokens 4, on a new connection
closed after the answer; ttft_ms is from before the connect to the first streamed token.
systemd's own timestamps of the units (CLOCK_MONOTONIC, the same clock as time.monotonic() here)
give each start's pieces: the server's process started, the unit active, the old one stopped.
Python 3 standard library only.
"""

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time

TIMEOUT_S = 120  # every request and wait is bounded: a hung server fails the run, not stalls it


def ms_since(t0, t=None):
    return round(((time.monotonic() if t is None else t) - t0) * 1000, 1)


def request(port, model):
    """One streamed completion on a new connection: status, ttft_ms, request_ms, tokens, error."""
    t0 = time.monotonic()
    out = {"port": port, "status": 0, "ttft_ms": None, "request_ms": None, "error": None}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        body = json.dumps({"model": model, "prompt": "Hello", "max_tokens": 4, "stream": True,
                           "temperature": 0})
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        out["status"] = r.status
        if r.status != 200:
            out["error"] = r.read(2000).decode(errors="replace")
            return out
        for line in r:
            if not line.startswith(b"data: "):
                continue
            if line.startswith(b"data: [DONE]"):
                break
            chunk = json.loads(line[6:])
            if out["ttft_ms"] is None and chunk.get("choices"):
                out["ttft_ms"] = ms_since(t0)
            if chunk.get("usage"):
                out["tokens"] = chunk["usage"].get("completion_tokens")
    except (OSError, http.client.HTTPException, ValueError) as e:
        out["error"] = "%s: %s" % (type(e).__name__, e)
    finally:
        conn.close()
        out["request_ms"] = ms_since(t0)
    if out["ttft_ms"] is None and out["error"] is None:
        out["error"] = "no token streamed"
    return out


def healthy(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/health")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def wait_healthy(port):
    """GET /health every 10 ms until 200 (llama.cpp's own server tests do the same)."""
    end = time.monotonic() + TIMEOUT_S
    while not healthy(port):
        if time.monotonic() > end:
            raise SystemExit("measure.py: port %d not healthy after %d s" % (port, TIMEOUT_S))
        time.sleep(0.01)


class HealthWatch:
    """GET /health of the berth server's own port (server_port, not the socket's) every 10 ms
    from t0 until 200, in a thread: when the server itself was ready, as the manual poll sees
    it, so that what berth adds after that is measured apart from the load's spread."""

    def __init__(self, port, t0):
        self.port, self.t0, self.healthy_ms = port, t0, None
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        end = self.t0 + TIMEOUT_S
        while time.monotonic() < end:
            if healthy(self.port):
                self.healthy_ms = ms_since(self.t0)
                return
            time.sleep(0.01)

    def result(self):
        self.thread.join(TIMEOUT_S)
        return self.healthy_ms


def systemctl(*args):
    r = subprocess.run(["systemctl"] + list(args), capture_output=True, text=True,
                       timeout=TIMEOUT_S)
    return r.stdout.strip()


def state(unit):
    return systemctl("is-active", unit) or "unknown"


def stamps(unit, t0):
    """systemd's monotonic timestamps of `unit`, in ms after t0 (None: before t0 or unset)."""
    props = ["ExecMainStartTimestampMonotonic", "ActiveEnterTimestampMonotonic",
             "InactiveEnterTimestampMonotonic"]
    out = {}
    for line in systemctl("show", unit, *["-p" + p for p in props]).splitlines():
        k, _, v = line.partition("=")
        us = int(v or 0)
        key = {"ExecMainStartTimestampMonotonic": "exec_ms",
               "ActiveEnterTimestampMonotonic": "active_ms",
               "InactiveEnterTimestampMonotonic": "inactive_ms"}[k]
        out[key] = round(us / 1000 - t0 * 1000, 1) if us and us / 1e6 >= t0 else None
    return out


def wait_inactive(unit):
    end = time.monotonic() + TIMEOUT_S
    while state(unit) not in ("inactive", "failed"):
        if time.monotonic() > end:
            raise SystemExit("measure.py: %s still %s after %d s" % (unit, state(unit), TIMEOUT_S))
        time.sleep(0.05)


def berth_part(a, rec):
    """Cold, warm and swap through berth's sockets (every connection is the proxy's, as a
    client's would be), then svc-b's idle stop."""
    A, B = a.names[0], a.names[1]
    for name in a.names:  # every on-demand server idle before the cold request
        wait_inactive("svc-%s.service" % name)
    rec["before_cold"] = state("svc-%s.service" % A)
    t0 = time.monotonic()
    watch = HealthWatch(a.server[A], t0)
    rec["berth_cold"] = request(a.port[A], A)
    rec["berth_cold"]["healthy_ms"] = watch.result()
    rec["berth_cold"].update(stamps("svc-%s.service" % A, t0))
    rec["berth_warm"] = [request(a.port[A], A) for _ in range(a.warm_requests)]

    rec["before_swap"] = {A: state("svc-%s.service" % A), B: state("svc-%s.service" % B)}
    t0 = time.monotonic()
    watch = HealthWatch(a.server[B], t0)
    rec["berth_swap"] = request(a.port[B], B)
    rec["berth_swap"]["healthy_ms"] = watch.result()
    rec["berth_swap"].update(stamps("svc-%s.service" % B, t0))
    rec["berth_swap"]["old_inactive_ms"] = stamps("svc-%s.service" % A, t0)["inactive_ms"]
    rec["after_swap"] = {A: state("svc-%s.service" % A), B: state("svc-%s.service" % B)}
    t_last = time.monotonic()
    wait_inactive("svc-%s.service" % B)
    rec["idle_stop_s"] = round(time.monotonic() - t_last, 2)


def manual_start(rec, key, port, model, t0):
    """After systemctl: /health every 10 ms, then the request; ttft_ms from t0."""
    started = ms_since(t0)
    wait_healthy(port)
    health = ms_since(t0)
    r = request(port, model)
    r.update({"systemctl_ms": started, "healthy_ms": health,
              "ttft_ms": None if r["ttft_ms"] is None else round(health + r["ttft_ms"], 1)})
    rec[key] = r


def manual_part(a, rec):
    """The operator's alternative with the plain units: start, warm, stop a + start b."""
    A, B = a.names[0], a.names[1]
    rec["before_manual"] = state("plain-%s.service" % A)
    t0 = time.monotonic()
    systemctl("start", "plain-%s.service" % A)
    manual_start(rec, "manual_cold", a.plain[A], A, t0)
    rec["manual_cold"].update(stamps("plain-%s.service" % A, t0))
    rec["plain_warm"] = [request(a.plain[A], A) for _ in range(a.warm_requests)]

    t0 = time.monotonic()
    systemctl("stop", "plain-%s.service" % A)
    stopped = ms_since(t0)
    systemctl("start", "plain-%s.service" % B)
    manual_start(rec, "manual_swap", a.plain[B], B, t0)
    rec["manual_swap"]["stop_ms"] = stopped
    rec["manual_swap"].update(stamps("plain-%s.service" % B, t0))
    systemctl("stop", "plain-%s.service" % B)


def one_round(a, n):
    """berth first in even rounds, the manual start first in odd ones: neither always comes
    right after the other's stop."""
    rec = {"round": n, "warmup": n == 0, "load": round(os.getloadavg()[0], 2),
           "order": "berth first" if n % 2 == 0 else "manual first"}
    parts = [berth_part, manual_part] if n % 2 == 0 else [manual_part, berth_part]
    for part in parts:
        part(a, rec)
    return rec


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base-port", type=int, required=True)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--names", default="a,b")
    p.add_argument("--warm-requests", type=int, default=3)
    p.add_argument("--routed", action="store_true")  # every svc on base_port, by its model
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    a.names = a.names.split(",")
    a.port = {name: a.base_port + (0 if a.routed else i)  # the sockets (--routed: the front)
              for i, name in enumerate(a.names)}
    a.server = {name: a.base_port + 10 + i for i, name in enumerate(a.names)}  # berth's servers
    a.plain = {name: a.base_port + 20 + i for i, name in enumerate(a.names)}  # the plain units
    with open(a.out, "w") as f:
        for n in range(a.rounds + 1):
            rec = one_round(a, n)
            f.write(json.dumps(rec) + "\n")
            f.flush()
            c, s = rec["berth_cold"], rec["berth_swap"]
            mc, ms = rec["manual_cold"], rec["manual_swap"]
            print("round %d%s: cold %s ms (manual %s), swap %s ms (manual %s), warm %s ms "
                  "(plain %s), idle stop after %s s" % (
                      n, " (warm-up)" if n == 0 else "", c["ttft_ms"], mc["ttft_ms"],
                      s["ttft_ms"], ms["ttft_ms"], rec["berth_warm"][-1]["ttft_ms"],
                      rec["plain_warm"][-1]["ttft_ms"], rec["idle_stop_s"]),
                  file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
