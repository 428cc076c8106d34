#!/usr/bin/env bash
# The on-demand benchmark: what a client waits for the first token of a model that berth stopped
# when idle (cold), of a model that takes the turn of another in its swap group (swap), and of a
# model kept running (warm), against what an operator would do by hand with plain units of the
# same servers (systemctl start, /health every 10 ms, the request), in one run, on a real systemd
# booted in a sandbox (tests/sandbox/sdsandbox.sh) with the real llama-server on the CPU.
# See README.md beside this file.
#
#   tests/bench/on_demand/run.sh [--berth PATH] [--work DIR] [--rounds N] [--keep]
#                                [--idle-stop D] [--base-port P] [--routed]
#
#   --berth PATH   the berth binary (default: $BERTH, else build/berth); copied into DIR, and the
#                  units run that copy (a rebuild of build/berth meanwhile changes nothing)
#   --work DIR     scratch dir: the models (kept between runs), manifest, apply and plan
#                  output, rounds.jsonl, results.txt (default /var/tmp/berth-bench-on-demand)
#   --rounds N     measured rounds, after one warm-up round (default 12; about 6 s each on 2 cores)
#   --keep         leave the state and the sandbox's journal in DIR (default: results kept)
#   --idle-stop D  the services' idle_stop (default 2s: short, for the bench)
#   --base-port P  ports P, P+1 (the sockets), P+10, P+11 (berth's servers), P+20, P+21 (the
#                  plain units) (default 18100; the first free block of 30 from there)
#   --routed       one public port P for both, `fronts: {P: {route: model}}` (HAProxy routes
#                  each request by its body's model to the service's socket on a loopback port)
#   --llama-server PATH, --llama-src DIR  (default: the build of the commit
#                  tests/real_engine/llama_cpp.pin names, under $BERTH_CACHE/llama.cpp,
#                  default /var/cache/berth/llama.cpp: .ci/setup --tests builds it)
#
# Must run as root (the sandbox needs it). A measurement, not a test: exits 0 whatever the
# numbers, non-zero only when something failed to run.
set -euo pipefail
umask 022

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BERTH_SRC=${BERTH:-$ROOT/build/berth}
WORK=/var/tmp/berth-bench-on-demand
ROUNDS=12
ROUTED=()
KEEP=0
IDLE_STOP=2s
BASE_PORT=18100
LLAMA_COMMIT=$(sed -n 's/^commit=//p' "$ROOT/tests/real_engine/llama_cpp.pin")
LLAMA_DIR=${BERTH_CACHE:-/var/cache/berth}/llama.cpp
LLAMA_SERVER=$LLAMA_DIR/build-$LLAMA_COMMIT/bin/llama-server
LLAMA_SRC=$LLAMA_DIR/src-$LLAMA_COMMIT
while [ $# -gt 0 ]; do
  case "$1" in
    --berth) BERTH_SRC=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --idle-stop) IDLE_STOP=$2; shift 2 ;;
    --base-port) BASE_PORT=$2; shift 2 ;;
    --routed) ROUTED=(--routed); shift ;;
    --llama-server) LLAMA_SERVER=$2; shift 2 ;;
    --llama-src) LLAMA_SRC=$2; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
log() { echo "== $*" >&2; }
[ "$(id -u)" = 0 ] || { echo "run.sh: must run as root (the systemd sandbox needs it)" >&2; exit 2; }
[ -x "$BERTH_SRC" ] || { echo "run.sh: no berth binary at $BERTH_SRC (build it, or --berth PATH)" >&2; exit 2; }
[ -x "$LLAMA_SERVER" ] || { echo "run.sh: no llama-server at $LLAMA_SERVER (.ci/setup --tests builds it; or --llama-server PATH)" >&2; exit 2; }
[ -d "$LLAMA_SRC/gguf-py" ] || { echo "run.sh: no llama.cpp source (gguf-py) at $LLAMA_SRC (or --llama-src DIR)" >&2; exit 2; }
SDSB=$ROOT/tests/sandbox/sdsandbox.sh

mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
export SDSB_BASE=$WORK/sandboxes SDSB_OWNER=$$
mkdir -p "$SDSB_BASE"
SANDBOX=
cleanup() {
  local rc=$?
  set +e
  if [ -n "$SANDBOX" ]; then
    local save=()
    [ "$KEEP" = 1 ] && save=(--save-journal)
    bash "$SDSB" stop "$SANDBOX" "${save[@]}" >/dev/null 2>&1 || bash "$SDSB" stop "$SANDBOX"
  fi
  bash "$SDSB" stop-all --orphans --prune >/dev/null 2>&1
  [ "$KEEP" = 1 ] || rm -rf "$WORK/state" "${SDSB_BASE:?}/$SANDBOX"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Thirty ports from BASE_PORT, none of them taken on this host (the sandbox shares its network).
BASE_PORT=$(python3 - "$BASE_PORT" <<'PY'
import socket, sys
base = int(sys.argv[1])
for b in range(base, base + 3000, 30):
    ok = True
    for p in range(b, b + 30):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            ok = False
        finally:
            s.close()
        if not ok:
            break
    if ok:
        print(b)
        break
PY
)
[ -n "$BASE_PORT" ] || { echo "run.sh: no free block of 30 ports" >&2; exit 1; }

# The units run this copy: build/berth may be rebuilt while the bench runs.
install -m 755 "$BERTH_SRC" "$WORK/berth"
BERTH_BIN=$WORK/berth
log "berth: $BERTH_SRC ($("$BERTH_BIN" --version 2>/dev/null | head -1)); $(nproc) cores; ports from $BASE_PORT; work dir $WORK"
log "models: two random-weight GGUFs (tests/real_engine/make_gguf.py; made once, kept in $WORK/store)"
python3 "$HERE/make_world.py" models --store "$WORK/store" --llama-src "$LLAMA_SRC"
GGUF_BYTES=$(stat -L -c %s "$WORK"/store/models--bench--on-demand-a/snapshots/*/model.gguf)

SANDBOX=on-demand-$$
log "booting sandbox $SANDBOX"
bash "$SDSB" start "$SANDBOX" --timeout 60 >"$WORK/sandbox.log" 2>&1 || { cat "$WORK/sandbox.log" >&2; exit 1; }
# shellcheck disable=SC1090
source "$SDSB_BASE/$SANDBOX/env"
python3 "$HERE/make_world.py" manifest --store "$WORK/store" --unit-dir "$SDSB_UNITS" \
  --llama-server "$LLAMA_SERVER" --berth "$BERTH_BIN" --base-port "$BASE_PORT" \
  --idle-stop "$IDLE_STOP" "${ROUTED[@]}" --out "$WORK/berth.yaml"
host=(--bus "$SDSB_SYSTEM_BUS_ADDRESS" --state-dir "$WORK/state")
rm -rf "$WORK/state"
log "berth apply: the sockets of svc-a and svc-b, the plain units written and left stopped"
"$BERTH_BIN" apply --yes "${host[@]}" --journal-dir "$SDSB_ROOT/run/log/journal" \
  -f "$WORK/berth.yaml" >"$WORK/apply.log" 2>&1 || { tail -30 "$WORK/apply.log" >&2; exit 1; }
grep -E "^ +[0-9]+ +\+ start" "$WORK/apply.log" | sed 's/^/    /' >&2 || true

log "$ROUNDS rounds (and a warm-up round): cold, warm, swap through berth; then by hand"
bash "$SDSB" exec "$SANDBOX" /usr/bin/python3 "$HERE/measure.py" --base-port "$BASE_PORT" \
  --rounds "$ROUNDS" "${ROUTED[@]}" --out "$WORK/rounds.jsonl"

# What berth's plan now says a first request waits: a pass (this no-op apply) records the last
# request start of each on-demand unit from systemd's timestamps; plan itself records nothing.
"$BERTH_BIN" apply --yes "${host[@]}" --journal-dir "$SDSB_ROOT/run/log/journal" \
  -f "$WORK/berth.yaml" >"$WORK/apply-after.log" 2>&1 || true
"$BERTH_BIN" plan "${host[@]}" -f "$WORK/berth.yaml" >"$WORK/plan-after.txt" 2>&1 || true
grep -E "on demand +service/" "$WORK/plan-after.txt" | sed 's/^/    plan: /' >&2 || true

title="on-demand benchmark: llama-server on the CPU, 2 random-weight GGUFs of $(((GGUF_BYTES + 500000) / 1000000)) MB (read, not mapped; 1 thread), idle_stop $IDLE_STOP, swap_group of 2${ROUTED:+, one routed port}; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $("$BERTH_BIN" --version 2>/dev/null | head -1), the bench at $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'); $(date -u +%Y-%m-%dT%H:%MZ)"
python3 "$HERE/report.py" "$WORK/rounds.jsonl" --title "$title" | tee "$WORK/results.txt"
