#!/usr/bin/env bash
# The plan benchmark: `berth plan --observed` over generated manifests of N vLLM services
# (half converged in the observation) and a no-op world of 1,000, against the goal of issue 39
# (1,000 services planned within 0.3 s, text and JSON). See README.md beside this file.
#
#   tests/bench/plan/run.sh [--berth PATH] [--compare PATH] [--sizes 100,1000] [--reps 5]
#                           [--work DIR] [--noop N]
#
#   --berth PATH   the berth binary (default: $BERTH, else build/berth)
#   --compare PATH another berth binary timed on the same worlds (e.g. an older build): each
#                  row then says how --berth's wall time compares with it
#   --sizes L      numbers of services, comma-separated (default 100,1000)
#   --reps R       runs per size and output format; medians are reported (default 5)
#   --work DIR     where the worlds and the last plan of each are written
#                  (default /var/tmp/berth-bench-plan); results.txt stays there
#   --noop N       size of the no-op world (default 1000; 0: none)
#
# No root, no systemd, no network: plans from saved observations only. A measurement, not a
# test: exits 0 whatever the numbers (PASS/MISS say how they compare with the goals), non-zero
# only when something failed to run or a plan said something unexpected.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BERTH_BIN=${BERTH:-$ROOT/build/berth}
COMPARE=
SIZES=100,1000
REPS=5
WORK=/var/tmp/berth-bench-plan
NOOP=1000
while [ $# -gt 0 ]; do
  case "$1" in
    --berth) BERTH_BIN=$2; shift 2 ;;
    --compare) COMPARE=$2; shift 2 ;;
    --sizes) SIZES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --noop) NOOP=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$BERTH_BIN" ] || { echo "run.sh: no berth binary at $BERTH_BIN (build it, or --berth)" >&2; exit 2; }
mkdir -p "$WORK"
echo "== writing the worlds ($SIZES; no-op $NOOP) into $WORK" >&2
python3 "$HERE/make_plan_world.py" --berth "$BERTH_BIN" --sizes "$SIZES" --noop "$NOOP" --out "$WORK"
python3 "$HERE/measure.py" --berth "$BERTH_BIN" ${COMPARE:+--compare "$COMPARE"} --work "$WORK" \
  --sizes "$SIZES" --reps "$REPS" --noop "$NOOP" | tee "$WORK/results.txt"
