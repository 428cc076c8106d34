#!/usr/bin/env bash
# The load generator benchmark: how much CPU berth bench's generator spends per streamed token,
# against what an operator would write instead (Node's fetch, Python's http.client), all reading
# the same fake vLLM in the same run. See README.md beside this file.
#
#   tests/bench/loadgen/run.sh [--berth PATH] [--concurrency N] [--duration S] [--max-tokens N]
#                              [--rate R] [--tools "berth node python"] [--work DIR]
#
#   --berth PATH     the berth binary (default: $BERTH, else build/berth)
#   --concurrency N  streams (default 64)
#   --duration S     seconds each tool measures (default 10)
#   --max-tokens N   per request (default 256)
#   --rate R         the fake's tokens per second per stream (default 0: as fast as it can)
#   --tools T        contenders, space-separated (default "berth node python"; also
#                    berth-gather0: berth reading each token as it comes, --gather-us 0)
#   --work DIR       scratch folder (default: a new one under /tmp, removed at the end)
#
# Each client runs pinned to CPU 0 (taskset), the fake vLLM to the other CPUs, so "tokens per
# CPU second" of a client is what one core of it sustains. A measurement, not a test: exits 0
# whatever the numbers (a PASS/MISS line compares berth with the bar of 100,000 tokens per CPU
# second), non-zero only when something failed to run.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BERTH_BIN=${BERTH:-$ROOT/build/berth}
CONCURRENCY=64
DURATION=10
MAX_TOKENS=256
RATE=0
TOOLS="berth node python"
WORK=
while [ $# -gt 0 ]; do
  case "$1" in
    --berth) BERTH_BIN=$2; shift 2 ;;
    --concurrency) CONCURRENCY=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --max-tokens) MAX_TOKENS=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --tools) TOOLS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$BERTH_BIN" ] || { echo "run.sh: no berth binary at $BERTH_BIN (build it, or --berth)" >&2; exit 2; }
KEEP=1
if [ -z "$WORK" ]; then WORK=$(mktemp -d /tmp/berth-bench-loadgen.XXXXXX); KEEP=0; fi
mkdir -p "$WORK"
NCPU=$(nproc)
PIN_CLIENT=(); PIN_FAKE=()
if command -v taskset >/dev/null && [ "$NCPU" -ge 2 ]; then
  PIN_CLIENT=(taskset -c 0); PIN_FAKE=(taskset -c "1-$((NCPU - 1))")
fi
FAKE_PID=
cleanup() {
  [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null && wait "$FAKE_PID" 2>/dev/null || true
  [ "$KEEP" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$ROOT/tests/fake_vllm/make_model.py" "$WORK/model" >/dev/null
"${PIN_FAKE[@]}" python3 "$ROOT/tests/fake_vllm/fake_vllm.py" serve "$WORK/model" --host 127.0.0.1 \
  --port "$PORT" --served-model-name bench --tokens-per-second "$RATE" 2>"$WORK/fake.log" &
FAKE_PID=$!
for _ in $(seq 200); do
  python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$PORT),0.2)" 2>/dev/null && break
  kill -0 "$FAKE_PID" 2>/dev/null || { echo "run.sh: the fake vLLM exited:" >&2; cat "$WORK/fake.log" >&2; exit 1; }
  sleep 0.05
done
cat >"$WORK/berth.yaml" <<YAML
berth: 1
models:
  bench:
    source: hf://bench/model
    revision: $(printf 'c%.0s' $(seq 40))
    size: 1GB
services:
  vllm-bench:
    model: bench
    engine: vllm
    gpus: [0]
    port: $PORT
    bind: 127.0.0.1
    vllm: {served_model_name: bench}
YAML

fake_cpu() { awk '{ print ($14 + $15) }' "/proc/$FAKE_PID/stat"; }
TICK=$(getconf CLK_TCK)
echo "load generator benchmark: $CONCURRENCY streams, ${DURATION}s, max_tokens $MAX_TOKENS," \
     "fake rate ${RATE} tok/s/stream (0: unpaced), $NCPU CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "$(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
printf '%-13s %10s %9s %8s %8s %12s %14s %8s %9s\n' tool tokens requests "wall s" "CPU s" \
  "tok/s" "tok/CPU-s" "RSS MB" "vs berth"
BERTH_PER_CPU=
for tool in $TOOLS; do
  before=$(fake_cpu)
  case "$tool" in
    berth|berth-gather0)
      # berth-gather0: every token read as it comes (--gather-us 0), the generator before the
      # gathered reads, in the same run.
      gather=(); [ "$tool" = berth-gather0 ] && gather=(--gather-us 0)
      "${PIN_CLIENT[@]}" python3 "$HERE/measure.py" "$WORK/$tool.json" "$BERTH_BIN" bench \
        vllm-bench -f "$WORK/berth.yaml" --concurrency "$CONCURRENCY" --duration "${DURATION}s" \
        --max-tokens "$MAX_TOKENS" --no-save -o json --state-dir "$WORK/state" "${gather[@]}" ;;
    node)
      "${PIN_CLIENT[@]}" python3 "$HERE/measure.py" "$WORK/$tool.json" node "$HERE/client.mjs" \
        127.0.0.1 "$PORT" bench "$CONCURRENCY" "$DURATION" "$MAX_TOKENS" ;;
    python)
      "${PIN_CLIENT[@]}" python3 "$HERE/measure.py" "$WORK/$tool.json" python3 "$HERE/client.py" \
        127.0.0.1 "$PORT" bench "$CONCURRENCY" "$DURATION" "$MAX_TOKENS" ;;
    *) echo "run.sh: unknown tool $tool" >&2; exit 2 ;;
  esac
  after=$(fake_cpu)
  python3 - "$WORK/$tool.json" "$tool" "$(( (after - before) ))" "$TICK" "${BERTH_PER_CPU:-0}" \
      >"$WORK/$tool.line" <<'PY'
import json, sys
cost = json.load(open(sys.argv[1]))
out = json.load(open(sys.argv[1] + ".stdout"))
tool, fake_ticks, tick, berth = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
if "levels" in out:  # berth bench -o json
    tokens = sum(l["output_tokens"] for l in out["levels"])
    requests = sum(l["requests"] for l in out["levels"])
    seconds = sum(l["seconds"] for l in out["levels"])
else:
    tokens, requests, seconds = out["output_tokens"], out["requests"], out["seconds"]
per_cpu = tokens / cost["cpu_s"] if cost["cpu_s"] > 0 else float("inf")
ratio = "%.1fx" % (berth / per_cpu) if berth > 0 and tool != "berth" else "1.0x"
print("%-13s %10d %9d %8.2f %8.2f %12.0f %14.0f %8.1f %9s" % (
    tool, tokens, requests, cost["wall_s"], cost["cpu_s"], tokens / seconds, per_cpu,
    cost["max_rss_kb"] / 1024, ratio))
print("PER_CPU %f FAKE_CPU %.2f" % (per_cpu, fake_ticks / tick))
PY
  head -1 "$WORK/$tool.line"
  [ "$tool" = berth ] && BERTH_PER_CPU=$(awk '/^PER_CPU/ { print $2 }' "$WORK/$tool.line")
  echo "         (fake vLLM CPU while $tool ran: $(awk '/^PER_CPU/ { print $4 }' "$WORK/$tool.line") s)"
done
if [ -n "$BERTH_PER_CPU" ]; then
  python3 -c "
v = float('$BERTH_PER_CPU')
print('%s  berth sustains %.0f tokens per CPU second on one core (bar: 100,000, issue 23)'
      % ('PASS' if v >= 100000 else 'MISS', v))"
fi
