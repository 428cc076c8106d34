#!/usr/bin/python3
"""measure.py - times `berth plan --observed` over the worlds make_plan_world.py wrote.

  measure.py --berth PATH --work DIR [--compare PATH] [--sizes 100,1000] [--reps 5] [--noop 1000]

For each N: `berth plan -f DIR/nN/berth.yaml --observed DIR/nN/observed.json
--detailed-exitcode`, as text and with `-o json`, REPS times each; the median wall time, the
median CPU time (user + system, from wait4's rusage) and the largest peak RSS (ru_maxrss).
Then the no-op world (DIR/noopN). Prints the table, each wall time as a ratio of the goal
(0.3 s) and, with --compare, of the other binary's wall time on the same world; then the growth
exponent and PASS/MISS lines against the goal (README.md). Exits 0 whatever the numbers; 1 when
a plan failed or said something other than expected (changes pending for nN, none for the
no-op).
"""

import argparse
import math
import os
import statistics
import subprocess
import sys
import time

GOAL_N = 1000       # 1,000 services (and the no-op world of 1,000) ...
GOAL_WALL_S = 0.3   # ... planned in at most 0.3 s (wall), text and JSON


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
    p.add_argument("--compare", default="")
    p.add_argument("--work", required=True)
    p.add_argument("--sizes", default="100,1000")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--noop", type=int, default=1000)
    a = p.parse_args(argv)
    worlds = [("n%d" % n, n, 2) for n in map(int, a.sizes.split(","))]
    if a.noop:
        worlds.append(("noop%d" % a.noop, a.noop, 0))
    rows = []  # (world, n, fmt, this, other)
    for name, n, want_rc in worlds:
        for fmt in ("text", "json"):
            world = os.path.join(a.work, name)
            # Alternated per world and format, so that a change of load falls on both alike.
            this = measure(a.berth, world, fmt, a.reps, want_rc)
            other = measure(a.compare, world, fmt, a.reps, want_rc) if a.compare else None
            rows.append((name, n, fmt, this, other))
            print("== %s %s: %.3f s wall, %.3f s CPU, %.1f MiB" % (
                name, fmt, this["wall"], this["cpu"], this["rss"]), file=sys.stderr)

    print("berth plan --observed: %s, %d CPUs online (load average %s), median of %d" % (
        a.berth, os.cpu_count(), " ".join("%.1f" % x for x in os.getloadavg()), a.reps))
    if a.compare:
        print("compared with: %s" % a.compare)
    print("%-9s %-5s %8s %8s %11s %8s %9s%s" % (
        "world", "out", "wall s", "CPU s", "CPU ms/svc", "RSS MiB", "of goal",
        "  compared  (its wall s)" if a.compare else ""))
    for name, n, fmt, r, other in rows:
        line = "%-9s %-5s %8.3f %8.3f %11.3f %8.1f %8.2fx" % (
            name, fmt, r["wall"], r["cpu"], r["cpu"] * 1000 / n, r["rss"], r["wall"] / GOAL_WALL_S)
        if other:
            line += "  %7.2fx  (%.3f)" % (r["wall"] / other["wall"], other["wall"])
        print(line)

    cpu = {(name, fmt): r["cpu"] for name, n, fmt, r, _ in rows}
    sizes = sorted(n for name, n, _ in worlds if name.startswith("n"))
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        for fmt in ("text", "json"):
            print("growth exponent (%s, CPU, %d -> %d): %.2f (1.00 = linear; fixed costs "
                  "read as less)" % (fmt, lo, hi, math.log(cpu[("n%d" % hi, fmt)] /
                                                          cpu[("n%d" % lo, fmt)]) /
                                     math.log(hi / lo)))
    for name, n, fmt, r, _ in rows:
        if n == GOAL_N:
            print("%s %s %s: %.3f s wall (goal <= %.1f s: %.2fx of it; CPU %.3f s)" % (
                verdict(r["wall"] <= GOAL_WALL_S), name, fmt, r["wall"], GOAL_WALL_S,
                r["wall"] / GOAL_WALL_S, r["cpu"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
