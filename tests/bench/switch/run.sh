#!/usr/bin/env bash
# The switch benchmark: what a client of the port sees while `berth apply` replaces the service
# serving it (svc-a, model a, by svc-b, model b, on the same port; svc-b's fake vLLM loads for
# 4 s), without a front and with one, on a real systemd booted in a sandbox
# (tests/sandbox/sdsandbox.sh), measured by tests/prober/prober.py. See README.md beside this file.
#
#   tests/bench/switch/run.sh [--berth PATH] [--modes "none front front-full"] [--port P]
#                             [--work DIR] [--keep] [--engine fake|llama]
#
#   --berth PATH   the berth binary (default: $BERTH, build/berth, else built into build-bench/)
#   --modes M      which halves to run, in order (default "none front front-full"):
#                    none        no front: today's switch (the port is shared: stop-first)
#                    front       fronts: {P: {hold: 10m, drain: 2m}}, the GPU has room for both
#                                (make-before-break)
#                    front-full  the same front, the GPU full with svc-a (hold)
#                    cold        no front; svc-b's fake vLLM reads its weights (--weights-gib)
#                                at start, evicted from the page cache just before the switch,
#                                host.prewarm: false (the dark window with a cold start)
#                    prewarm     the same, host.prewarm left on: the plan reads svc-b's weights
#                                into the page cache before svc-a stops
#                    back-cold   the front, the GPU full; both load for 4 s; svc-a -> svc-b, then
#                                the switch measured: back to svc-a, a cold start
#                    back-standby  the same with standby: sleep on both: the first switch puts
#                                svc-a to sleep, the switch back wakes it (0.5 s)
#   --weights-gib G  svc-b's weights for cold and prewarm, GiB (default 2; on the disk of DIR)
#   --engine E     fake (default): the fake vLLM; llama: the real llama.cpp llama-server on the
#                  CPU serving a random-weight GGUF of about 280 MB per model (modes none,
#                  front, cold, prewarm; svc-b's load is the real one, no delay is faked)
#   --stop-timeout T  for --engine llama: both services' stop_timeout (default: berth's, 2m);
#                  llama-server with requests in flight waits for them at SIGTERM, so without
#                  a front the old server's stop is part of the dark window, up to it
#   --llama-server PATH, --llama-src DIR  for --engine llama (default: the build of the commit
#                  tests/real_engine/llama_cpp.pin names, under $BERTH_CACHE/llama.cpp,
#                  default /var/cache/berth/llama.cpp: .ci/setup --tests builds it)
#   --port P       the public port (default 8000; when something listens there already, the
#                  first free port from 18000, said so)
#   --work DIR     scratch dir: store, manifests, logs, prober summaries, results.txt (default
#                  /var/tmp/berth-bench-switch)
#   --keep         leave each mode's state and logs in DIR (default: removed, results kept)
#
# Must run as root (the sandbox needs it). Builds the fake NVML (tests/fake_nvml/fake_nvml.cc)
# with g++ into DIR. A measurement, not a test: exits 0 whatever the numbers, non-zero only when
# something failed to run. A front half that this berth's `berth validate` refuses (the manifest
# key `fronts` unknown) prints "front: not available in this berth (manifest key fronts unknown)".
set -euo pipefail
umask 022

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
BERTH_BIN=${BERTH:-}
MODES="none front front-full"
WEIGHTS_GIB=2
PORT=8000
WORK=/var/tmp/berth-bench-switch
KEEP=0
ENGINE=fake
STOP_TIMEOUT=
LLAMA_COMMIT=$(sed -n 's/^commit=//p' "$ROOT/tests/real_engine/llama_cpp.pin")
LLAMA_DIR=${BERTH_CACHE:-/var/cache/berth}/llama.cpp
LLAMA_SERVER=$LLAMA_DIR/build-$LLAMA_COMMIT/bin/llama-server
LLAMA_SRC=$LLAMA_DIR/src-$LLAMA_COMMIT
while [ $# -gt 0 ]; do
  case "$1" in
    --berth) BERTH_BIN=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --weights-gib) WEIGHTS_GIB=$2; shift 2 ;;
    --port) PORT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --engine) ENGINE=$2; shift 2 ;;
    --stop-timeout) STOP_TIMEOUT=$2; shift 2 ;;
    --llama-server) LLAMA_SERVER=$2; shift 2 ;;
    --llama-src) LLAMA_SRC=$2; shift 2 ;;
    -h|--help) sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
log() { echo "== $*" >&2; }
case "$ENGINE" in
  fake) ;;
  llama)
    [ -x "$LLAMA_SERVER" ] || { echo "run.sh: no llama-server at $LLAMA_SERVER (.ci/setup --tests builds it; or --llama-server PATH)" >&2; exit 2; }
    for m in $MODES; do
      case "$m" in none|front|cold|prewarm) ;;
        *) echo "run.sh: mode $m needs a GPU or standby: --engine llama runs none, front, cold and prewarm" >&2; exit 2 ;;
      esac
    done ;;
  *) echo "run.sh: --engine is fake or llama, not $ENGINE" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] || { echo "run.sh: must run as root (the systemd sandbox needs it)" >&2; exit 2; }

if [ -z "$BERTH_BIN" ]; then
  if [ -x "$ROOT/build/berth" ]; then
    BERTH_BIN=$ROOT/build/berth
  else
    log "building berth into $ROOT/build-bench (RelWithDebInfo)"
    cmake -S "$ROOT" -B "$ROOT/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DBUILD_TESTING=OFF >/dev/null
    cmake --build "$ROOT/build-bench" --target berth >/dev/null
    BERTH_BIN=$ROOT/build-bench/berth
  fi
fi
[ -x "$BERTH_BIN" ] || { echo "run.sh: no berth binary at $BERTH_BIN" >&2; exit 2; }
SDSB=$ROOT/tests/sandbox/sdsandbox.sh
FAKE_VLLM=$ROOT/tests/fake_vllm/fake_vllm.py
PROBER=$ROOT/tests/prober/prober.py
MW="python3 $HERE/make_world.py"

mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
export SDSB_BASE=$WORK/sandboxes SDSB_OWNER=$$
mkdir -p "$SDSB_BASE"
SANDBOX=
PROBER_PID=
NVML_PID=
cleanup() {
  local rc=$?
  set +e
  [ -n "$PROBER_PID" ] && kill "$PROBER_PID" 2>/dev/null && wait "$PROBER_PID" 2>/dev/null
  [ -n "$NVML_PID" ] && kill "$NVML_PID" 2>/dev/null && wait "$NVML_PID" 2>/dev/null
  if [ -n "$SANDBOX" ]; then bash "$SDSB" stop "$SANDBOX" >/dev/null 2>&1 || bash "$SDSB" stop "$SANDBOX"; fi
  bash "$SDSB" stop-all --orphans --prune >/dev/null 2>&1
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

listening() {  # PORT: does anything accept on 127.0.0.1:PORT now?
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.settimeout(1)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)
PY
}
if listening "$PORT"; then
  want=$PORT
  PORT=$(python3 - <<'PY'
import socket
for p in range(18000, 19000):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); print(p); break
    except OSError:
        pass
    finally:
        s.close()
PY
)
  log "port $want is taken on this host (the sandbox shares its network): using $PORT"
fi

log "fake NVML: g++ tests/fake_nvml/fake_nvml.cc into $WORK/nvml"
mkdir -p "$WORK/nvml"
g++ -std=c++20 -O1 -shared -fPIC -I"$ROOT" "$ROOT/tests/fake_nvml/fake_nvml.cc" \
  -o "$WORK/nvml/libnvidia-ml.so.1"
NVML_LIB=$WORK/nvml/libnvidia-ml.so.1

# svc-b's weights, read at its start in the cold and prewarm modes (none without them).
weights=0
case " $MODES " in *" cold "*|*" prewarm "*) weights=$WEIGHTS_GIB ;; esac
B_BLOBS=$WORK/store/models--bench--switch-b/blobs
ENGINE_ARGS=()
if [ "$ENGINE" = llama ]; then
  log "llama-server: $LLAMA_SERVER; two random-weight GGUFs (tests/real_engine/make_gguf.py)"
  $MW models --store "$WORK/store" --engine llama --llama-src "$LLAMA_SRC"
  B_BLOBS=$WORK/store/models--bench--switch-llama-b/blobs
  ENGINE_ARGS=(--engine llama --llama-server "$LLAMA_SERVER")
  [ -n "$STOP_TIMEOUT" ] && ENGINE_ARGS+=(--stop-timeout "$STOP_TIMEOUT")
else
  $MW models --store "$WORK/store" --weights-gib "$weights"
fi
PAGE_CACHE_TOOL=$(dirname "$BERTH_BIN")/tests/providers/page_cache_tool
ROWS=$WORK/rows.tsv
: >"$ROWS"
now() { date +%s.%N; }

run_mode() {  # MODE
  local mode=$1 front=() gpu=room D=$WORK/$1 weights=() back=()
  case "$mode" in
    back-cold) front=(--front); gpu=full; back=(--claims "$WORK/$1/claims") ;;
    back-standby) front=(--front); gpu=full; back=(--claims "$WORK/$1/claims" --standby) ;;
    none) ;;
    front) front=(--front) ;;
    front-full) front=(--front); gpu=full ;;
    cold) weights=(--read-weights --no-prewarm) ;;
    prewarm) weights=(--read-weights) ;;
    *) echo "run.sh: unknown mode $mode" >&2; exit 2 ;;
  esac
  rm -rf "$D"; mkdir -p "$D"
  SANDBOX=switch-$$-$mode
  log "$mode: booting sandbox $SANDBOX"
  bash "$SDSB" start "$SANDBOX" --timeout 60 >"$D/sandbox.log" 2>&1 || { cat "$D/sandbox.log" >&2; exit 1; }
  # shellcheck disable=SC1090
  source "$SDSB_BASE/$SANDBOX/env"
  local mk=(--store "$WORK/store" --unit-dir "$SDSB_UNITS" --vllm "$FAKE_VLLM" --env-dir "$D/env"
            --port "$PORT" --gpu "$gpu" "${front[@]}" "${weights[@]}" "${back[@]}"
            "${ENGINE_ARGS[@]}")
  $MW manifest "${mk[@]}" --serving a --out "$D/before.yaml"
  $MW manifest "${mk[@]}" --serving b --out "$D/after.yaml"

  if [ ${#front[@]} -gt 0 ] && ! "$BERTH_BIN" validate -f "$D/before.yaml" >"$D/validate.txt" 2>&1; then
    if grep -qi "fronts" "$D/validate.txt"; then
      log "$mode: berth validate refuses the key fronts: $(grep -i -m1 fronts "$D/validate.txt")"
      printf '%s\tunavailable\n' "$mode" >>"$ROWS"
      bash "$SDSB" stop "$SANDBOX" >>"$D/sandbox.log" 2>&1; SANDBOX=
      return 0
    fi
    cat "$D/validate.txt" >&2; echo "run.sh: $mode: the manifest is refused" >&2; exit 1
  fi

  # The fake GPU follows the units' processes (host PIDs, as berth on the host reads them); in
  # the switch-back modes the fake vLLMs claim their memory themselves (asleep: 512 MiB).
  export FAKE_NVML_CONFIG=$D/nvml.conf
  rm -f "$D/nvml.stop"
  if [ "$ENGINE" = llama ]; then
    # llama-server runs on the CPU here: the GPU berth observes stays empty.
    unset FAKE_NVML_CLAIMS_DIR
    echo "device 0 GPU-bench-0000 $((80 << 30)) 0 0 NVIDIA H100 80GB HBM3" >"$FAKE_NVML_CONFIG"
  elif [ ${#back[@]} -gt 0 ]; then
    mkdir -p "$D/claims"
    export FAKE_NVML_CLAIMS_DIR=$D/claims
    echo "device 0 GPU-bench-0000 $((80 << 30)) 0 0 NVIDIA H100 80GB HBM3" >"$FAKE_NVML_CONFIG"
  else
    unset FAKE_NVML_CLAIMS_DIR
    $MW nvml --gpu "$gpu" --cgroup "$SDSB_CGROUP" --out "$FAKE_NVML_CONFIG" --until "$D/nvml.stop" &
    NVML_PID=$!
  fi
  local host=(--bus "$SDSB_SYSTEM_BUS_ADDRESS" --journal-dir "$SDSB_ROOT/run/log/journal"
              --nvml-library "$NVML_LIB" --state-dir "$D/state")
  local berth=("$BERTH_BIN" apply --yes "${host[@]}")

  log "$mode: svc-a (model a) up on port $PORT"
  "${berth[@]}" -f "$D/before.yaml" >"$D/apply-before.log" 2>&1 || { tail -30 "$D/apply-before.log" >&2; exit 1; }
  sleep 0.3  # one turn of the NVML follower: the plan sees svc-a's memory on the GPU
  local target=$D/after.yaml
  if [ ${#back[@]} -gt 0 ]; then
    log "$mode: svc-a -> svc-b first (not measured), then the switch back is measured"
    "${berth[@]}" -f "$D/after.yaml" >"$D/apply-first.log" 2>&1 || { tail -30 "$D/apply-first.log" >&2; exit 1; }
    grep -E " (sleep|stop) +service/svc-a" "$D/apply-first.log" | head -2 | sed 's/^/    first: /' >&2 || true
    target=$D/before.yaml
  fi

  log "$mode: prober on (${PROBE_LOAD[*]}, GET /v1/models and POST completions, 4 streams)"
  python3 "$PROBER" --url "http://127.0.0.1:$PORT" "${PROBE_LOAD[@]}" --path /v1/models \
    --completions --streams 4 --stream-tokens 150 --timeout 120 \
    --max-duration 170 --stop-file "$D/prober.stop" --ready-file "$D/prober.ready" \
    --out "$D/prober.json" 2>"$D/prober.txt" &
  PROBER_PID=$!
  for _ in $(seq 300); do [ -e "$D/prober.ready" ] && break; sleep 0.05; done
  [ -e "$D/prober.ready" ] || { echo "run.sh: the prober saw no answer from svc-a" >&2; exit 1; }
  sleep 1

  # The plan of the switch, kept for reading (its disruption lines say how the port fares).
  # (berth plan takes no --journal-dir: it reads no journal.)
  "$BERTH_BIN" plan --bus "$SDSB_SYSTEM_BUS_ADDRESS" --nvml-library "$NVML_LIB" \
    --state-dir "$D/state" -f "$target" >"$D/plan-switch.txt" 2>&1 || true
  if [ ${#weights[@]} -gt 0 ]; then
    # svc-b's weights out of the page cache: its start reads them from disk unless berth
    # reads them first.
    [ -x "$PAGE_CACHE_TOOL" ] || { echo "run.sh: no $PAGE_CACHE_TOOL (build the tests)" >&2; exit 2; }
    "$PAGE_CACHE_TOOL" evict "$B_BLOBS"/* >/dev/null
    log "$mode: svc-b's weights evicted: $("$PAGE_CACHE_TOOL" residency "$B_BLOBS"/*)"
    grep -E "prewarm" "$D/plan-switch.txt" | sed 's/^/    plan: /' >&2 || true
  fi
  log "$mode: berth apply: $( [ ${#back[@]} -gt 0 ] && echo "svc-b -> svc-a (back)" || echo "svc-a -> svc-b (svc-b loads$( [ "$ENGINE" = llama ] && echo " its GGUF" || echo " for 4 s, or reads its weights"))")"
  grep -E " (wake|start|sleep|stop) +service/" "$D/plan-switch.txt" | sed 's/^/    plan: /' >&2 || true
  local t0 t1 rc=0
  t0=$(now)
  "${berth[@]}" -f "$target" >"$D/apply-switch.log" 2>&1 || rc=$?
  t1=$(now)
  [ "$rc" = 0 ] || { echo "run.sh: $mode: the switch's apply exited $rc:" >&2; tail -20 "$D/apply-switch.log" >&2; }
  sleep "$SETTLE"  # the streams begun on svc-b run to their end; the prober sees svc-b settled
  touch "$D/prober.stop"
  wait "$PROBER_PID"; PROBER_PID=
  if [ -n "$NVML_PID" ]; then touch "$D/nvml.stop"; wait "$NVML_PID"; NVML_PID=; fi
  cat "$D/prober.txt" >&2
  printf '%s\t%s\t%s\t%s\n' "$mode" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')" \
    "$rc" "$D/prober.json" >>"$ROWS"

  bash "$SDSB" stop "$SANDBOX" >>"$D/sandbox.log" 2>&1
  rm -rf "${SDSB_BASE:?}/$SANDBOX"
  SANDBOX=
  [ "$KEEP" = 1 ] || rm -rf "$D/state" "$D/env"
}

# The prober: against the fake, a request every 10 ms, completions of 4 tokens with 2000 bytes of
# prompt. Against the real engine on 2 cores, every 50 ms, completions of 1 token with a short
# prompt: 50 completions a second is more than llama-server makes there (a decode step of a
# 280 MB model takes some tens of ms), and the queue would grow for the whole run.
PROBE_LOAD=(--interval-ms 10 --body-bytes 2000)
SETTLE=3.5  # s after the switch: 150 tokens at the fake's 50 tok/s
if [ "$ENGINE" = llama ]; then PROBE_LOAD=(--interval-ms 50 --max-tokens 1); SETTLE=10; fi
log "berth: $BERTH_BIN; $(nproc) cores; port $PORT; work dir $WORK; engine $ENGINE"
for mode in $MODES; do run_mode "$mode"; done
python3 "$HERE/report.py" "$ROWS" --port "$PORT" --engine "$ENGINE" | tee "$WORK/results.txt"
