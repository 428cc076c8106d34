#!/usr/bin/python3
"""measure.py OUT.json CMD ARGS... - runs CMD and writes what it cost: wall seconds, CPU seconds
(user and system, from wait4's rusage of CMD and its children) and peak RSS. CMD's stdout goes to
OUT.json.stdout, its stderr to OUT.json.stderr. Exits with CMD's status."""

import json
import os
import subprocess
import sys
import time


def main():
    out, cmd = sys.argv[1], sys.argv[2:]
    with open(out + ".stdout", "wb") as so, open(out + ".stderr", "wb") as se:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=so, stderr=se)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    with open(out, "w") as f:
        json.dump({"wall_s": wall, "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
                   "cpu_s": ru.ru_utime + ru.ru_stime, "max_rss_kb": ru.ru_maxrss,
                   "exit": code}, f)
    return code


if __name__ == "__main__":
    sys.exit(main())
