#!/usr/bin/python3
"""report.py - the on-demand benchmark's table and ratios, from measure.py's rounds.

  report.py ROUNDS.jsonl [--title TEXT]

Medians over the rounds (the warm-up round 0 left out), their min and max; per start also when
the server itself answered /health (healthy) and what came after it (first token - healthy: for
berth the ExecStartPost= poll, the proxy's start and its relay; for the manual start the 10 ms
poll's last step and the request). The ratios are of the medians; "paired" is the median of the
rounds' own differences (berth and the manual start of one round ran seconds apart, so the
machine's load of the moment weighs on both). Python 3 standard library only.
"""

import argparse
import json
import statistics
import sys

ROWS = [  # key, title
    ("plain_warm", "warm, plain unit (always on)"),
    ("berth_warm", "warm, berth (socket + proxy)"),
    ("manual_cold", "cold, manual start"),
    ("berth_cold", "cold, berth (after idle stop)"),
    ("manual_swap", "swap, manual (stop a, start b)"),
    ("berth_swap", "swap, berth (request to b)"),
]


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, unit=""):
    return "-" if v is None else "%.0f%s" % (v, unit)


def samples(rounds, key, field):
    out = []
    for r in rounds:
        v = r[key]
        for one in (v if isinstance(v, list) else [v]):
            out.append(one.get(field))
    return out


def after_healthy(rounds, key):
    return [None if r[key].get("healthy_ms") is None or r[key]["ttft_ms"] is None
            else r[key]["ttft_ms"] - r[key]["healthy_ms"] for r in rounds]


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rounds")
    p.add_argument("--title", default="")
    a = p.parse_args(argv)
    with open(a.rounds) as f:
        every = [json.loads(line) for line in f if line.strip()]
    rounds = [r for r in every if not r.get("warmup")]
    if not rounds:
        print("report.py: no measured round in %s" % a.rounds, file=sys.stderr)
        return 1
    failed = [(r["round"], k, r[k].get("error") or r[k].get("status"))
              for r in rounds for k, _ in ROWS if not isinstance(r[k], list)
              and r[k]["ttft_ms"] is None]
    failed += [(r["round"], k, one.get("error") or one.get("status"))
               for r in rounds for k in ("plain_warm", "berth_warm") for one in r[k]
               if one["ttft_ms"] is None]
    checks = [(r["round"], "svc-a was %s before its cold request" % r["before_cold"])
              for r in rounds if r["before_cold"] != "inactive"]
    checks += [(r["round"], "before the swap %s, after it %s" % (r["before_swap"], r["after_swap"]))
               for r in rounds if sorted(r["before_swap"].values()) != ["active", "inactive"]
               or r["after_swap"] != {k: ("inactive" if v == "active" else "active")
                                      for k, v in r["before_swap"].items()}]
    if a.title:
        print(a.title)
    print("%d rounds (after a warm-up round); time to first token of a streamed completion, ms"
          % len(rounds))
    print("%-32s %8s %8s %8s %9s %14s" % ("", "median", "min", "max", "healthy",
                                          "token-healthy"))
    m = {}
    for key, title in ROWS:
        ttft = samples(rounds, key, "ttft_ms")
        m[key] = med(ttft)
        ok = [v for v in ttft if v is not None]
        healthy = med(samples(rounds, key, "healthy_ms"))
        print("%-32s %8s %8s %8s %9s %14s" % (
            title, fmt(m[key]), fmt(min(ok) if ok else None), fmt(max(ok) if ok else None),
            fmt(healthy), fmt(med(after_healthy(rounds, key))) if healthy is not None else "-"))

    def ratio(num, den):
        return "-" if m[num] is None or not m[den] else "%.2fx" % (m[num] / m[den])

    def paired(num, den):
        d = [r[num]["ttft_ms"] - r[den]["ttft_ms"] for r in rounds
             if r[num]["ttft_ms"] is not None and r[den]["ttft_ms"] is not None]
        return "%+.0f ms" % statistics.median(d) if d else "-"

    print("cold / warm: berth's cold request %s ms against the always-on server's %s ms: %s"
          % (fmt(m["berth_cold"]), fmt(m["plain_warm"]), ratio("berth_cold", "plain_warm")))
    print("berth cold vs manual cold start: %s (paired difference %s)"
          % (ratio("berth_cold", "manual_cold"), paired("berth_cold", "manual_cold")))
    print("berth swap vs manual swap: %s (paired difference %s)"
          % (ratio("berth_swap", "manual_swap"), paired("berth_swap", "manual_swap")))
    print("berth warm (through the proxy) vs plain warm: %s" % ratio("berth_warm", "plain_warm"))
    print("after the server was healthy, to the first token: berth cold %s ms, manual cold %s ms;"
          " berth swap %s ms, manual swap %s ms"
          % tuple(fmt(med(after_healthy(rounds, k))) for k in
                  ("berth_cold", "manual_cold", "berth_swap", "manual_swap")))

    def added(num, den):  # paired: what berth adds after the server's own readiness
        d = [x - y for x, y in zip(after_healthy(rounds, num), after_healthy(rounds, den))
             if x is not None and y is not None]
        return "%+.0f ms" % statistics.median(d) if d else "-"

    print("what berth adds once the server is healthy (paired, median): cold %s, swap %s"
          % (added("berth_cold", "manual_cold"), added("berth_swap", "manual_swap")))

    def gap(key, start, end):  # median over the rounds of end - start, per round
        d = [r[key][end] - r[key][start] for r in rounds
             if r[key].get(start) is not None and r[key].get(end) is not None]
        return fmt(med(d), " ms")

    print("  of it: the unit active after healthy (its ExecStartPost= poll of /health): "
          "cold %s, swap %s;" % (gap("berth_cold", "healthy_ms", "active_ms"),
                                 gap("berth_swap", "healthy_ms", "active_ms")))
    print("  the first token after active (the proxy unit's start, its /health, the exec of "
          "systemd-socket-proxyd, the relay): cold %s, swap %s"
          % (gap("berth_cold", "active_ms", "ttft_ms"), gap("berth_swap", "active_ms", "ttft_ms")))
    def piece(key, field):
        return fmt(med([r[key].get(field) for r in rounds]))

    print("the pieces (medians, ms after the request or the first systemctl): server process "
          "started / healthy / unit active / first token")
    for key, title in ROWS[2:]:
        print("  %-30s %6s / %6s / %6s / %6s%s" % (
            title, piece(key, "exec_ms"), piece(key, "healthy_ms"), piece(key, "active_ms"),
            piece(key, "ttft_ms"), "   (old server stopped %s)" % piece(key, "old_inactive_ms")
            if key == "berth_swap" else "   (systemctl stop %s)" % piece(key, "stop_ms")
            if key == "manual_swap" else ""))
    idle = [r["idle_stop_s"] for r in rounds]
    print("idle stop (idle_stop 2s): svc-b's unit inactive %.2f s (median; %.2f to %.2f) after "
          "its last answer" % (statistics.median(idle), min(idle), max(idle)))
    loads = [r.get("load") for r in rounds if r.get("load") is not None]
    if loads:
        print("load average at the rounds' start: %.1f to %.1f" % (min(loads), max(loads)))
    print("per round (ms): round, order, load, cold berth/manual, swap berth/manual, "
          "server start to healthy berth cold/manual cold")
    for r in rounds:
        def hs(key):  # the load itself: the server's process start to its /health 200
            h, e = r[key].get("healthy_ms"), r[key].get("exec_ms")
            return fmt(None if h is None or e is None else h - e)
        print("  %2d  %-12s %4s  %5s/%-5s  %5s/%-5s  %5s/%-5s" % (
            r["round"], r.get("order", ""), r.get("load", "-"), fmt(r["berth_cold"]["ttft_ms"]),
            fmt(r["manual_cold"]["ttft_ms"]), fmt(r["berth_swap"]["ttft_ms"]),
            fmt(r["manual_swap"]["ttft_ms"]), hs("berth_cold"), hs("manual_cold")))
    for n, key, why in failed:
        print("round %d: %s failed: %s" % (n, key, why))
    for n, why in checks:
        print("round %d: %s" % (n, why))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
