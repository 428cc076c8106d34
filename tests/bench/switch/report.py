#!/usr/bin/python3
"""report.py - the switch benchmark's table, from run.sh's rows and the prober's summaries.

  report.py ROWS.tsv --port P [--engine fake|llama]

ROWS.tsv: one line per mode, `MODE<TAB>SWITCH_S<TAB>APPLY_RC<TAB>PROBER_JSON`, or
`MODE<TAB>unavailable` for a front half this berth refuses. Python 3 standard library only.
"""

import argparse
import json
import os
import sys
import time

TITLES = {"none": "no front", "front": "front (room)", "front-full": "front (full GPU)",
          "cold": "cold start", "prewarm": "prewarmed", "back-cold": "back, cold start",
          "back-standby": "back, woken"}


def fmt_ms(v):
    return "-" if v is None else "%.1f" % v


def ratio(base, other):
    if base is None or other is None:
        return "-"
    if other == 0:
        return "%d -> 0" % base
    return "%.1fx" % (base / other)


def longest_run(timeline, failing):
    """The longest run of 100 ms buckets that are `failing` and have nothing ok, in ms. A bucket
    in which the prober sent nothing (it stalls on a loaded machine) neither ends a run nor
    starts one: it counts when failing buckets follow it."""
    best = run = empty = 0
    for ok, refused, other in timeline["buckets"]:
        if not (ok or refused or other):
            empty += 1 if run else 0
        elif failing(refused, other) and not ok:
            run += empty + 1
            empty = 0
        else:
            run = empty = 0
        best = max(best, run)
    return best * timeline["bucket_ms"]


def dark_gap(timeline):
    """The longest run of 100 ms buckets with refusals and nothing ok, in ms."""
    return longest_run(timeline, lambda refused, other: refused)


def no_ok_gap(timeline):
    """The longest run of 100 ms buckets with failures (refused or not) and nothing ok, in ms:
    llama-server listens while it loads and answers 503, which `dark` (refusals) leaves out."""
    return longest_run(timeline, lambda refused, other: refused or other)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rows")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--engine", choices=("fake", "llama"), default="fake")
    a = p.parse_args(argv)
    rows = []
    with open(a.rows) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 2:
                rows.append((parts[0], None, None, None))
                continue
            mode, switch_s, rc, path = parts[:4]
            with open(path) as j:
                rows.append((mode, float(switch_s), int(rc), json.load(j)))
    llama = a.engine == "llama"
    print("switch benchmark: svc-a (model a) -> svc-b (model b, %s) on port %d, "
          "%d cores, %s" % ("llama-server on the CPU, a 280 MB GGUF" if llama else "loads 4 s",
                            a.port, os.cpu_count() or 0,
                            time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())))
    print("prober: a request every %s on a new connection (GET /v1/models, POST "
          "/v1/completions alternating), 4 streams of 150 tokens %s back to back"
          % (("50 ms", "as fast as llama-server makes them") if llama
             else ("10 ms", "at 50 tok/s")))
    head = ("%-17s %8s %5s %8s %8s %9s %8s%s %9s %9s %9s  %s" % (
        "mode", "switch", "rc", "requests", "refused", "failed", "dark",
        " %8s" % "no ok" if llama else "", "streams", "p50 ms", "p99 ms", "models"))
    print(head)
    base = None
    for mode, switch_s, rc, s in rows:
        title = TITLES.get(mode, mode)
        if s is None:
            print("%-17s front: not available in this berth (manifest key fronts unknown)"
                  % title)
            continue
        lat = s["latency_ms"]
        print("%-17s %7.2fs %5d %8d %8d %9d %6.0fms%s %9s %9s %9s  %s" % (
            title, switch_s, rc, s["total"], s["counts"]["refused"], s["failed"],
            dark_gap(s["timeline"]), " %6.0fms" % no_ok_gap(s["timeline"]) if llama else "",
            "%d/%d" % (s["streams_completed"], s["streams_started"]),
            fmt_ms(lat["p50"]), fmt_ms(lat["p99"]), json.dumps(s["models"], sort_keys=True)))
        if mode == "none":
            base = s
    for mode, _, _, s in rows:
        if s is None or mode in ("none", "cold", "prewarm", "back-cold",
                                 "back-standby") or base is None:
            continue
        print("%s vs no front: refused %s, failed %s, p99 %s ms -> %s ms" % (
            TITLES.get(mode, mode), ratio(base["counts"]["refused"], s["counts"]["refused"]),
            ratio(base["failed"], s["failed"]), fmt_ms(base["latency_ms"]["p99"]),
            fmt_ms(s["latency_ms"]["p99"])))
    darks = {mode: dark_gap(s["timeline"]) for mode, _, _, s in rows if s is not None}
    if "cold" in darks and "prewarm" in darks:
        print("prewarmed vs cold start: the port dark %.0f ms -> %.0f ms (%.2fx)" % (
            darks["cold"], darks["prewarm"],
            darks["prewarm"] / darks["cold"] if darks["cold"] else float("nan")))
    no_oks = {mode: no_ok_gap(s["timeline"]) for mode, _, _, s in rows if s is not None}
    if llama and "cold" in no_oks and "prewarm" in no_oks:
        print("prewarmed vs cold start: nothing ok for %.0f ms -> %.0f ms (%.2fx)" % (
            no_oks["cold"], no_oks["prewarm"],
            no_oks["prewarm"] / no_oks["cold"] if no_oks["cold"] else float("nan")))
    back = {mode: (switch_s, s) for mode, switch_s, _, s in rows
            if s is not None and mode in ("back-cold", "back-standby")}
    if len(back) == 2:
        (cold_s, cold), (woke_s, woke) = back["back-cold"], back["back-standby"]
        print("switch back, woken vs cold start: the apply %.2f s -> %.2f s (%.2fx); the longest "
              "held request %s ms -> %s ms" % (cold_s, woke_s, woke_s / cold_s if cold_s else
                                                float("nan"), fmt_ms(cold["held"]["max"]),
                                                fmt_ms(woke["held"]["max"])))
    for mode, _, _, s in rows:
        if s is None:
            continue
        c = s["counts"]
        print("%s: failed = reset %d + 503 %d (Retry-After %d) + other %d + timeout %d + "
              "stream_incomplete %d + refused %d (%s); held (ok after > 1 s) %d, max %s ms; "
              "first error: %s" % (
                  TITLES.get(mode, mode), c["reset"], c["http_503"],
                  s["http_503_retry_after"]["with"], c["http_other"], c["timeout"],
                  c["stream_incomplete"], c["refused"],
                  ", ".join("%s %d" % (k, v["refused"]) for k, v in sorted(s["by_kind"].items())),
                  s["held"]["n"],
                  fmt_ms(s["held"]["max"]), s["first_error"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
