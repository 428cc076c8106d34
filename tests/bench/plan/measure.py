#!/usr/bin/python3
"""measure.py - times `berth plan --observed` over the worlds make_plan_world.py wrote.

  measure.py --berth PATH --work DIR [--sizes 100,1000,5000,10000] [--reps 3] [--noop 10000]

For each N: `berth plan -f DIR/nN/berth.yaml --observed DIR/nN/observed.json
--detailed-exitcode`, as text and with `-o json`, REPS times each; the median wall time, the
median CPU time (user + system, from wait4's rusage) and the largest peak RSS (ru_maxrss).
Then the no-op world (DIR/noopN). Prints the table, the growth exponent and PASS/MISS lines
against the goals (README.md). Exits 0 whatever the numbers; 1 when a plan failed or said
something other than expected (changes pending for nN, none for the no-op).
"""

import argparse
import math
import os
import statistics
import subprocess
import sys
import time

GOAL_WALL_S = 1.0       # 10,000 services planned in at most 1 s
GOAL_RSS_MIB = 128.0    # ... and 128 MiB
GOAL_CPU_RATIO = 1.3    # CPU per service at 10,000 within 1.3x of that at 1,000
GOAL_NOOP_S = 0.5       # the no-op plan at 10,000 in at most 0.5 s


def run_once(cmd, out_path):
    with open(out_path, "wb") as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024.0


def measure(berth, world, fmt, reps, want_rc):
    cmd = [berth, "plan", "-f", os.path.join(world, "berth.yaml"), "--observed",
           os.path.join(world, "observed.json"), "--detailed-exitcode"]
    if fmt == "json":
        cmd += ["-o", "json"]
    walls, cpus, rss = [], [], 0.0
    for _ in range(reps):
        rc, wall, cpu, maxrss = run_once(cmd, os.path.join(world, "plan.%s.out" % fmt))
        if rc != want_rc:
            sys.exit("measure.py: %s exited %d, expected %d; see %s" % (
                " ".join(cmd), rc, want_rc, os.path.join(world, "plan.%s.out" % fmt)))
        walls.append(wall)
        cpus.append(cpu)
        rss = max(rss, maxrss)
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus), "rss": rss}


def verdict(ok):
    return "PASS" if ok else "MISS"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--berth", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--sizes", default="100,1000,5000,10000")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--noop", type=int, default=10000)
    a = p.parse_args(argv)
    sizes = [int(n) for n in a.sizes.split(",")]
    rows = {}
    for n in sizes:
        world = os.path.join(a.work, "n%d" % n)
        for fmt in ("text", "json"):
            rows[(n, fmt)] = measure(a.berth, world, fmt, a.reps, want_rc=2)
            r = rows[(n, fmt)]
            print("== N=%d %s: %.3f s wall, %.3f s CPU, %.1f MiB" % (n, fmt, r["wall"], r["cpu"],
                                                                   r["rss"]), file=sys.stderr)
    noop = {}
    if a.noop:
        world = os.path.join(a.work, "noop%d" % a.noop)
        for fmt in ("text", "json"):
            noop[fmt] = measure(a.berth, world, fmt, a.reps, want_rc=0)

    print("berth plan --observed: %s, %d CPUs online (load average %s), median of %d" % (
        a.berth, os.cpu_count(), " ".join("%.1f" % x for x in os.getloadavg()), a.reps))
    print("%11s  %-5s %9s %9s %13s %9s" % ("N", "out", "wall s", "CPU s", "CPU ms/svc", "RSS MiB"))
    for n in sizes:
        for fmt in ("text", "json"):
            r = rows[(n, fmt)]
            print("%11d  %-5s %9.3f %9.3f %13.3f %9.1f" % (n, fmt, r["wall"], r["cpu"],
                                                         r["cpu"] * 1000 / n, r["rss"]))
    for fmt in ("text", "json"):
        if fmt in noop:
            r = noop[fmt]
            print("%11s  %-5s %9.3f %9.3f %13.3f %9.1f" % ("no-op %d" % a.noop if fmt == "text"
                                                         else "", fmt, r["wall"], r["cpu"],
                                                         r["cpu"] * 1000 / a.noop, r["rss"]))

    if 1000 in sizes and 10000 in sizes:
        for fmt in ("text", "json"):
            t1, t10 = rows[(1000, fmt)]["cpu"], rows[(10000, fmt)]["cpu"]
            print("growth exponent (%s, CPU, 1,000 -> 10,000): %.2f (1.00 = linear)" % (
                fmt, math.log(t10 / t1) / math.log(10)))
    if 10000 in sizes:
        for fmt in ("text", "json"):
            r = rows[(10000, fmt)]
            print("%s N=10000 %s: %.3f s wall (goal <= %.1f s; CPU %.3f s)" % (
                verdict(r["wall"] <= GOAL_WALL_S), fmt, r["wall"], GOAL_WALL_S, r["cpu"]))
            print("%s N=10000 %s: %.1f MiB peak RSS (goal <= %.0f MiB)" % (
                verdict(r["rss"] <= GOAL_RSS_MIB), fmt, r["rss"], GOAL_RSS_MIB))
        if 1000 in sizes:
            for fmt in ("text", "json"):
                per1 = rows[(1000, fmt)]["cpu"] / 1000
                per10 = rows[(10000, fmt)]["cpu"] / 10000
                print("%s CPU per service %s: %.3f ms at 10,000 vs %.3f ms at 1,000 = %.2fx "
                      "(goal <= %.1fx)" % (verdict(per10 <= GOAL_CPU_RATIO * per1), fmt,
                                           per10 * 1000, per1 * 1000, per10 / per1,
                                           GOAL_CPU_RATIO))
    if a.noop == 10000:
        for fmt in ("text", "json"):
            r = noop[fmt]
            print("%s no-op N=10000 %s: %.3f s wall (goal <= %.1f s; CPU %.3f s)" % (
                verdict(r["wall"] <= GOAL_NOOP_S), fmt, r["wall"], GOAL_NOOP_S, r["cpu"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
