#!/usr/bin/python3
"""report.py RESULTS.tsv [--rate R] [--berth PATH] [--nproc N] - the download benchmark's table.

Reads the lines run.sh wrote (tab-separated):
  cdn    SETTING  WHAT  BYTES  SECONDS
  run    SETTING  NAME  BYTES  WALL_WITH_SYNC  WALL_BEFORE_SYNC  USER_S  SYS_S  MAXRSS_KB  OK
  limit  WHAT     BYTES SECONDS
and prints the tables and one PASS/MISS line per bar. MB = 10^6 bytes.
"""

import argparse
import platform


def mbs(b, s):
    return b / s / 1e6 if s > 0 else float("inf")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("--rate", default="40m")
    ap.add_argument("--berth", default="berth")
    ap.add_argument("--nproc", default="?")
    opts = ap.parse_args()
    cdn, runs, limits = [], {}, []
    with open(opts.results) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[0] == "cdn":
                cdn.append((p[1], p[2], int(p[3]), float(p[4])))
            elif p[0] == "run":
                runs[(p[1], p[2])] = dict(bytes=int(p[3]), wall=float(p[4]), pre=float(p[5]),
                                          cpu=float(p[6] or 0) + float(p[7] or 0), user=float(p[6] or 0),
                                          sys=float(p[7] or 0), rss=int(p[8] or 0) * 1024 / 1e6,
                                          ok=p[9] == "1")
            elif p[0] == "limit":
                limits.append((p[1], int(p[2]), float(p[3])))
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    total = next(iter(runs.values()))["bytes"] if runs else 0
    print()
    print("download benchmark: %.2f GiB repo (%d bytes), %s cores (%s), %s" %
          (total / 2**30, total, opts.nproc, cpu, platform.platform()))
    print("berth: %s; capped = nginx limit_rate %s per connection; MB = 10^6 bytes" % (opts.berth, opts.rate))
    print()
    print("CDN alone (nginx on loopback, curl to /dev/null):")
    for setting, what, b, s in cdn:
        print("  %-9s %-15s %8.0f MB/s  (%d MiB in %.2f s)" % (setting, what, mbs(b, s), b >> 20, s))
    print()
    print("machine limits over the same bytes:")
    lim = {}
    for what, b, s in limits:
        lim[what] = mbs(b, s)
        print("  %-24s %8.0f MB/s  (%.2f s)" % (what, mbs(b, s), s))
    print()
    hdr = "%-9s %-8s %9s %9s %8s %8s %8s %9s %s" % ("setting", "tool", "MB/s", "pre-sync", "wall s",
                                                     "CPU s", "(u+s)", "RSS MB", "vs aria2c")
    print(hdr)
    print("-" * len(hdr))
    for setting in ("uncapped", "capped"):
        a = runs.get((setting, "aria2c"))
        for name in ("berth", "aria2c", "curl"):
            r = runs.get((setting, name))
            if not r:
                continue
            rate = mbs(r["bytes"], r["wall"])
            ratio = ("%.2fx" % (rate / mbs(a["bytes"], a["wall"]))) if a and a["ok"] else "-"
            print("%-9s %-8s %9.0f %9.0f %8.2f %8.2f %8s %9.1f %s%s" % (
                setting, name, rate, mbs(r["bytes"], r["pre"]), r["wall"], r["cpu"],
                "%.1f+%.1f" % (r["user"], r["sys"]), r["rss"], ratio, "" if r["ok"] else "  FAILED"))
    print("(MB/s: bytes / (download + sync); pre-sync: bytes / the tool's own run time)")
    print()
    print("the bar: at least as fast as aria2c in both settings while verifying every byte (aria2c")
    print("verifies nothing), uncapped at least as fast as curl's download plus sync, within 10% of")
    print("the slower machine limit when uncapped, peak RSS < 200 MB")

    def bar(ok, text):
        print("  %s  %s" % ("PASS" if ok else "MISS", text))

    for setting in ("uncapped", "capped"):
        b, a = runs.get((setting, "berth")), runs.get((setting, "aria2c"))
        if b and a and b["ok"] and a["ok"]:
            rb, ra = mbs(b["bytes"], b["wall"]), mbs(a["bytes"], a["wall"])
            bar(rb >= ra, "%s: berth %.0f MB/s >= aria2c %.0f MB/s (berth/aria2c = %.2f)" %
                (setting, rb, ra, rb / ra))
        else:
            print("  ----  %s: berth or aria2c did not run" % setting)
    b, c = runs.get(("uncapped", "berth")), runs.get(("uncapped", "curl"))
    if b and c and b["ok"] and c["ok"]:
        rb, rc = mbs(b["bytes"], b["wall"]), mbs(c["bytes"], c["wall"])
        bar(rb >= rc, "uncapped: berth %.0f MB/s >= curl + sync %.0f MB/s (berth/curl = %.2f)" %
            (rb, rc, rb / rc))
    disk, sha = lim.get("dd write (fdatasync)"), lim.get("sha256, one core")
    if b and b["ok"] and disk and sha:
        floor = min(disk, sha)
        which = "dd write" if disk <= sha else "sha256 (one core)"
        rb = mbs(b["bytes"], b["wall"])
        bar(rb >= 0.9 * floor, "uncapped: berth %.0f MB/s >= 90%% of the slower limit, %s %.0f MB/s (%.0f%%)" %
            (rb, which, floor, 100 * rb / floor))
    for setting in ("uncapped", "capped"):
        r = runs.get((setting, "berth"))
        if r and r["ok"]:
            bar(r["rss"] < 200, "%s: berth peak RSS %.1f MB < 200 MB" % (setting, r["rss"]))


if __name__ == "__main__":
    main()
