#!/usr/bin/python3
"""timeit.py - runs a command REPS times, prints one JSON line of wall times in seconds.

  timeit.py REPS LOG -- CMD...

Each run's stdout+stderr goes to LOG (the last run's is kept). Fails (exit 1) when a run exits
with a status other than 0 or 2 (berth plan --detailed-exitcode: 2 = changes pending, reported
as "rc" so the caller can tell a no-op from a plan with changes).
"""
import json
import statistics
import subprocess
import sys
import time


def main(argv):
    reps, log, cmd = int(argv[0]), argv[1], argv[3:]
    times, rcs = [], []
    for _ in range(reps):
        with open(log, "wb") as out:
            t0 = time.perf_counter()
            rc = subprocess.call(cmd, stdout=out, stderr=subprocess.STDOUT)
            times.append(time.perf_counter() - t0)
        rcs.append(rc)
        if rc not in (0, 2):
            print(json.dumps({"error": "exit %d" % rc, "times": times}))
            return 1
    print(json.dumps({"median": statistics.median(times), "min": min(times), "max": max(times),
                      "times": times, "rc": rcs}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
