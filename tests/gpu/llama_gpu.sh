#!/usr/bin/env bash
# berth against a real llama-server on a real GPU (issue 42), on the GPU machine: root, cgroup2
# writable, no systemd, no network (../shared/reference/gpu-machine.md). Not run in CI.
#
#   tests/gpu/llama_gpu.sh [CARRY]      CARRY: what tests/gpu/llama_carry.sh gathered (build-gpu)
#
# 1. builds llama-server, llama-bench and llama-fit-params with CUDA from CARRY's llama.cpp tree
#    (the commit tests/real_engine/llama_cpp.pin pins) into $WORK/llama, once per commit;
# 2. writes a random-weight F16 GGUF shaped like an 8B llama (make_gguf.py --f16, 14.5 GB) into a
#    model store under $WORK, once;
# 3. memory: berth plan's claim for the service (derived from the GGUF), llama-fit-params' figure,
#    and the bytes NVML gives the process once loaded and after the load;
# 4. start: exec to /health 200 (polled every 20 ms) with the page cache dropped, after berth's
#    prewarm of the file (page_cache_tool: berth's Prewarm), and warm;
# 5. throughput: berth bench at concurrency 1 and 16 (its server_account: llama-server's own
#    timings) and llama-bench;
# 6. attribution: the server runs as berth renders its unit (berth render's ExecStart and
#    Environment) in the cgroup system.slice/chat.service, as systemd would put it, and berth
#    observe lists its GPU memory under chat.service.
# Figures go to $OUT (the device call's) or $WORK/out: figures.txt (name=value), run.log, plan.txt,
# observe.txt, bench.json, llama-bench.txt, servers.log, build.log. Every wait is bounded; the
# servers are killed and the cgroup removed on exit. A step that fails is said and the rest runs.
#
# Knobs (environment): WORK (build-gpu-llama: kept between calls on a warm machine), LLAMA_BIN (a
# built llama.cpp bin/ folder: no build), GGUF_FLAGS (tests/real_engine/make_gguf.py's shape
# flags; default the 8B), CTX (8192), NP (16), NGL (99), BENCH_DURATION (20s), MAX_TOKENS (256), PORT (18080),
# NO_DROP (set: evict only the GGUF's pages instead of dropping the whole page cache).
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=$(realpath "${1:-build-gpu}")
WORK=$(mkdir -p "${WORK:-$here/build-gpu-llama}" && realpath "${WORK:-$here/build-gpu-llama}")
RES=${OUT:-$WORK/out}
CTX=${CTX:-8192} NP=${NP:-16} NGL=${NGL:-99} PORT=${PORT:-18080}
BENCH_DURATION=${BENCH_DURATION:-20s} MAX_TOKENS=${MAX_TOKENS:-256}
COMMIT=1111111111111111111111111111111111111111
UNIT=chat.service
CG=/sys/fs/cgroup/system.slice/$UNIT
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$RES"
exec > >(tee -a "$RES/run.log") 2>&1

PY=python3
$PY -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
BERTH=$CARRY/bin/berth
TOOL=$CARRY/bin/page_cache_tool
berth() { LD_LIBRARY_PATH=$CARRY/lib timeout 300 "$BERTH" "$@"; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
fig() { echo "$1=$2" | tee -a "$RES/figures.txt"; }
say() { echo; echo "== $(date -u +%T) $*"; }

SPID="" STOP_S=""
stop_server() {  # SIGTERM, then SIGKILL after 60 s; STOP_S: the seconds to its exit
  [[ -n $SPID ]] || return 0
  local t0
  t0=$(now)
  kill -TERM "$SPID" 2>/dev/null
  for _ in $(seq 3000); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.02; done
  kill -KILL "$SPID" 2>/dev/null && echo "(killed after 60 s)"
  wait "$SPID" 2>/dev/null
  STOP_S=$(since "$t0")
  SPID=""
}
cleanup() {
  stop_server
  if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then
    for _ in $(seq 50); do [[ -d $CG ]] && ! rmdir "$CG" 2>/dev/null || break; sleep 0.1; done
  fi
  true
}
trap cleanup EXIT
trap 'exit 2' INT TERM

say "machine"
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
fig card "\"$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0)\""
fig cpus "$(nproc)"
uname -r; $PY --version; cmake --version | head -1; nvcc --version | tail -1

# 1. llama.cpp with CUDA, once per commit.
src_commit=$(cat "$CARRY/llama-src.commit")
if [[ $(cat "$WORK/src.commit" 2>/dev/null) != "$src_commit" ]]; then
  rm -rf "$WORK/src"
  mkdir -p "$WORK/src"
  tar xJf "$CARRY/llama-src.tar.xz" -C "$WORK/src" && echo "$src_commit" >"$WORK/src.commit"
fi
if [[ -n ${LLAMA_BIN:-} ]]; then
  LB=$(realpath "$LLAMA_BIN")
else
  LB=$WORK/llama/bin
  if [[ $(cat "$WORK/llama/commit" 2>/dev/null) != "$src_commit" ]]; then
    say "build llama.cpp $src_commit with CUDA"
    rm -rf "$WORK/llama"
    t0=$(now)
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    # The tree has no .git: without a ceiling llama.cpp's build info would name the commit of the
    # repository around $WORK (berth's), as the run in tests/gpu/README.md did ("build 424,
    # commit 97b50b5"); with it, "unknown", and llama-src.commit says which it is.
    export GIT_CEILING_DIRECTORIES=$WORK
    if timeout 540 cmake -S "$WORK/src" -B "$WORK/llama" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF >"$RES/build.log" 2>&1 &&
      timeout 540 cmake --build "$WORK/llama" -j "$(nproc)" \
        --target llama-server llama-bench llama-fit-params >>"$RES/build.log" 2>&1; then
      echo "$src_commit" >"$WORK/llama/commit"
      fig build_s "$(since "$t0")"
    else
      tail -30 "$RES/build.log"
      echo "llama_gpu: the build failed (build.log)" >&2
      exit 1
    fi
  fi
fi
"$LB/llama-server" --version 2>&1 | tail -2

# 2. The 8B-shaped GGUF in a store laid out as berth's (HF cache), once.
SNAP=$WORK/store/models--org--m8b/snapshots/$COMMIT
GGUF=$SNAP/model.gguf
if [[ ! -e $WORK/store/gguf.done ]]; then
  say "write the GGUF"
  rm -rf "$WORK/store/models--org--m8b"  # llama_switch.py may write its second model beside
  mkdir -p "$SNAP" "$WORK/store/models--org--m8b/refs"
  echo -n "$COMMIT" >"$WORK/store/models--org--m8b/refs/main"
  t0=$(now)
  # shellcheck disable=SC2086
  timeout 400 $PY "$here/tests/real_engine/make_gguf.py" --llama-src "$WORK/src" --out "$GGUF" \
    --f16 ${GGUF_FLAGS:---embd 4096 --layers 32 --ff 14336 --heads 32 --kv 8 --ctx 8192} ||
    { echo "llama_gpu: the GGUF was not written" >&2; exit 1; }
  fig gguf_write_s "$(since "$t0")"
  touch "$WORK/store/gguf.done"
fi
fig gguf_bytes "$(stat -c %s "$GGUF")"

MANIFEST=$WORK/berth.yaml
cat >"$MANIFEST" <<EOF
berth: 1
host:
  store: $WORK/store
  unit_dir: $WORK/units
  executables: {llama-server: $LB/llama-server}
models:
  m8b: {source: hf://org/m8b, revision: $COMMIT}
services:
  chat:
    model: m8b
    engine: llama-server
    gpus: [0]
    port: $PORT
    bind: 127.0.0.1
    llama_server: {model_file: model.gguf, n_gpu_layers: $NGL, ctx_size: $CTX, parallel: $NP, alias: m8b}
    health: {timeout: 5m, interval: 20ms}
EOF
mkdir -p "$WORK/units"

# 3a. What berth plans: the claim derived from the GGUF.
say "berth plan -f $MANIFEST"
mkdir -p "$WORK/state"
{
  echo "\$ berth plan -f berth.yaml"
  berth plan -f "$MANIFEST" --state-dir "$WORK/state"
  echo "\$ berth render -f berth.yaml"
  berth render -f "$MANIFEST"
} 2>&1 | tee "$RES/plan.txt"
berth plan -f "$MANIFEST" --state-dir "$WORK/state" -o json >"$WORK/plan.json"
fig planned_claim_bytes "$($PY -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(sum(int(v) for r in d["resource_changes"] if r["action"] == "start"
          for v in r["requires"]["gpu_bytes"].values()))' "$WORK/plan.json")"

# The server's argv and environment, exactly as the unit berth renders starts it.
mapfile -t ARGV < <(berth render -f "$MANIFEST" | $PY -c '
import shlex, sys
for line in sys.stdin:
    if line.startswith("ExecStart="):
        print("\n".join(shlex.split(line[len("ExecStart="):])))')
mapfile -t ENVS < <(berth render -f "$MANIFEST" | $PY -c '
import shlex, sys
for line in sys.stdin:
    if line.startswith("Environment="):
        print("\n".join(shlex.split(line[len("Environment="):])))')
echo "argv: ${ARGV[*]}"
echo "env: ${ENVS[*]}"
[[ ${#ARGV[@]} -gt 1 ]] || { echo "llama_gpu: no ExecStart in berth render" >&2; exit 1; }

# 3b. llama-fit-params on the same file and flags, the GPU empty.
say "llama-fit-params -m model.gguf -c $CTX -np $NP -ngl $NGL -fitp on"
timeout 180 "$LB/llama-fit-params" -m "$GGUF" -c "$CTX" -np "$NP" -ngl "$NGL" -fitp on \
  >"$WORK/fitp.txt" 2>"$WORK/fitp.err"
grep -v '^$' "$WORK/fitp.txt"
fig fit_params_mib "\"$(awk 'NF == 4' "$WORK/fitp.txt" | head -1)\""  # device model context compute
say "llama-fit-params -m model.gguf -c $CTX -np $NP -v"
timeout 180 "$LB/llama-fit-params" -m "$GGUF" -c "$CTX" -np "$NP" -v 2>&1 |
  grep -E 'total =|MiB|-c [0-9]+ -ngl' | tail -20

# 4. Starts. The server is put into the unit's cgroup at once, before it touches the GPU.
HEALTH='
import http.client, json, sys, time
t0, port, pid = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
first = None
deadline = time.time() + 300
while time.time() < deadline:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        c.request("GET", "/health")
        s = c.getresponse().status
        c.close()
        if first is None:
            first = time.time() - t0
        if s == 200:
            print("%.2f %.2f" % (first, time.time() - t0))
            sys.exit(0)
    except OSError:
        pass
    try:
        state = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "gone"
    if state in ("Z", "X", "gone"):
        print("exited exited"); sys.exit(1)
    time.sleep(0.02)
print("timeout timeout"); sys.exit(1)
'
start_server() {  # $1: label; sets SPID, and FIRST_S and HEALTHY_S (exec to 503, to 200)
  local t0
  echo "--- $1" >>"$RES/servers.log"
  t0=$(now)
  env "${ENVS[@]}" "${ARGV[@]}" >>"$RES/servers.log" 2>&1 &
  SPID=$!
  if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then
    mkdir -p "$CG"
    echo "$SPID" >"$CG/cgroup.procs"
  fi
  $PY -c "$HEALTH" "$t0" "$PORT" "$SPID" >"$WORK/health.txt"
  read -r FIRST_S HEALTHY_S <"$WORK/health.txt"
  echo "$1: first answer ${FIRST_S} s, /health 200 ${HEALTHY_S} s after exec"
  [[ $HEALTHY_S != exited ]] || tail -20 "$RES/servers.log"
}
drop_caches() {  # the whole page cache (root), or with NO_DROP=1 only the GGUF's pages
  sync
  if [[ -n ${NO_DROP:-} ]]; then "$TOOL" evict "$GGUF"; else echo 3 >/proc/sys/vm/drop_caches; fi
}

say "cold start (page cache dropped)"
drop_caches
echo "$("$TOOL" residency "$GGUF")"
start_server cold
fig cold_first_answer_s "$FIRST_S"
fig cold_healthy_s "$HEALTHY_S"
echo "server pid $SPID in $(cat /proc/"$SPID"/cgroup 2>/dev/null)"

# 3c + 6. Memory once loaded, as NVML gives it, and berth observe's attribution.
NVML='
import sys, pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
m = pynvml.nvmlDeviceGetMemoryInfo(h)
procs = {p.pid: p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)}
print(procs.get(int(sys.argv[1]), -1), m.used, m.total)
'
observe() {  # $1: label; prints "used_bytes unit" of the server's process as berth sees it
  {
    echo "\$ berth observe -f berth.yaml   # $1"
    berth observe -f "$MANIFEST" --state-dir "$WORK/state"
    echo "\$ berth observe -f berth.yaml -o json | (gpus)"
    berth observe -f "$MANIFEST" --state-dir "$WORK/state" -o json |
      $PY -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["gpus"], indent=1))'
    echo "\$ nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv"
    nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
  } 2>&1 | tee -a "$RES/observe.txt" >&2
  berth observe -f "$MANIFEST" --state-dir "$WORK/state" -o json | $PY -c '
import json, sys
pid = int(sys.argv[1])
for d in json.load(sys.stdin)["gpus"]["devices"]:
    for p in d["processes"]:
        if p["pid"] == pid:
            print(p["used_bytes"], p["unit"] or "-")
            sys.exit(0)
print(-1, "-")' "$SPID"
}
sleep 1
say "memory once loaded"
read -r nvml_loaded card_used card_total < <($PY -c "$NVML" "$SPID")
fig nvml_process_loaded_bytes "$nvml_loaded"
fig card_used_loaded_bytes "$card_used"
fig card_total_bytes "$card_total"
read -r berth_loaded unit_loaded < <(observe loaded)
fig berth_observe_process_loaded_bytes "$berth_loaded"
fig berth_observe_unit "$unit_loaded"

# 5. berth bench at 1 and 16 streams (with llama-server's own timings beside), then memory.
say "berth bench chat -f berth.yaml --concurrency 1,16 --duration $BENCH_DURATION --max-tokens $MAX_TOKENS"
berth bench chat -f "$MANIFEST" --state-dir "$WORK/state" --no-save --concurrency 1,16 \
  --duration "$BENCH_DURATION" --max-tokens "$MAX_TOKENS" --warmup 4 -o json >"$RES/bench.json"
$PY - "$RES/bench.json" <<'EOF' | tee -a "$RES/figures.txt"
import json, sys
d = json.load(open(sys.argv[1]))
for lv in d["levels"]:
    c = lv["concurrency"]
    sa = lv.get("server_account") or {}
    for k in ("requests", "errors", "output_tokens", "output_tokens_per_second", "ttft_mean_ms",
              "tpot_mean_ms", "user_tokens_per_second_p50"):
        print(f"bench_c{c}_{k}={lv.get(k)}")
    for k in ("requests", "output_tokens", "decode_ms", "tpot_mean_ms"):
        print(f"bench_c{c}_server_{k}={sa.get(k)}")
    if sa.get("tpot_mean_ms"):
        print(f"bench_c{c}_server_tokens_per_second_per_stream={1000 / sa['tpot_mean_ms']:.1f}")
EOF
say "memory after the load"
read -r nvml_after _ _ < <($PY -c "$NVML" "$SPID")
fig nvml_process_after_load_bytes "$nvml_after"
read -r berth_after unit_after < <(observe "after the load")
fig berth_observe_process_after_load_bytes "$berth_after"
fig berth_observe_unit_after_load "$unit_after"
stop_server
fig stop_s "$STOP_S"

say "prewarmed start (page cache dropped, then berth's Prewarm of the file)"
drop_caches
t0=$(now)
"$TOOL" prewarm "$GGUF"
fig prewarm_read_s "$(since "$t0")"
start_server prewarmed
fig prewarmed_healthy_s "$HEALTHY_S"
stop_server

say "warm start (the file still in the page cache)"
start_server warm
fig warm_healthy_s "$HEALTHY_S"
stop_server

say "llama-bench -m model.gguf -ngl $NGL -p 512 -n 128"
CUDA_VISIBLE_DEVICES=0 timeout 240 "$LB/llama-bench" -m "$GGUF" -ngl "$NGL" -p 512 -n 128 \
  2>&1 | tee "$RES/llama-bench.txt"

say "figures"
cat "$RES/figures.txt"
