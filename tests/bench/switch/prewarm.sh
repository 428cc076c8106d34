#!/usr/bin/env bash
# The start of a model server with its weights cold on disk, and after berth's prewarm read them
# into the page cache (providers/host/page_cache.h), in one run: the fake vLLM reads every byte
# of its *.safetensors before it listens (FAKE_VLLM_READ_WEIGHTS=1), as a real server loads its
# weights. Cold: the files dropped from the page cache first (POSIX_FADV_DONTNEED). Warm: dropped,
# then prewarmed by berth's code. The figure that matters: the start after a prewarm against the
# cold start; the prewarm itself runs before anything goes dark.
#
#   tests/bench/switch/prewarm.sh [--gib N] [--reps R] [--work DIR] [--tool PATH]
#
# The work dir must be on a disk filesystem (ext4, xfs, btrfs) so that the eviction takes: not
# a tmpfs. Default /var/tmp/berth-bench-prewarm, N = 2 GiB of weights, R = 3.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
gib=2 reps=3 work=/var/tmp/berth-bench-prewarm tool="$root/build/tests/providers/page_cache_tool"
while [ $# -gt 0 ]; do
  case "$1" in
    --gib) gib="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --tool) tool="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$tool" ] || { echo "no $tool: build the tests first (cmake --build build)" >&2; exit 2; }
model="$work/model"
mkdir -p "$model"
python3 - "$model" "$gib" <<'PY'
import json, os, struct, sys
model, gib = sys.argv[1], int(sys.argv[2])
with open(os.path.join(model, "config.json"), "w") as f:
    json.dump({"architectures": ["LlamaForCausalLM"], "max_position_embeddings": 4096}, f)
block = b"\x5a" * (8 << 20)
for i in range(gib):
    path = os.path.join(model, "model-%05d.safetensors" % i)
    if os.path.exists(path) and os.path.getsize(path) >= (1 << 30):
        continue
    header = json.dumps({"w": {"dtype": "U8", "shape": [1 << 30], "data_offsets": [0, 1 << 30]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header)
        for _ in range(128):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
PY
files=("$model"/*.safetensors)
fs=$(stat -f -c %T "$work")
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

# Seconds from the start of the fake vLLM to its first 200 on /health.
start_to_healthy() {
  local t0 pid
  t0=$(date +%s.%N)
  FAKE_VLLM_READ_WEIGHTS=1 python3 -B "$root/tests/fake_vllm/fake_vllm.py" serve "$model" \
    --port "$port" --host 127.0.0.1 2>"$work/fake.log" &
  pid=$!
  until curl -sf -o /dev/null "http://127.0.0.1:$port/health"; do
    kill -0 "$pid" 2>/dev/null || { cat "$work/fake.log" >&2; exit 1; }
    sleep 0.02
  done
  python3 -c "import sys; print('%.3f' % ($(date +%s.%N) - $t0))"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

echo "weights: $gib GiB in ${#files[@]} files on $fs ($work); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%4s  %14s  %14s  %10s  %10s\n' rep "cold start s" "prewarm s" "warm start s" "warm/cold"
cold_all=() warm_all=()
for rep in $(seq 1 "$reps"); do
  "$tool" evict "${files[@]}" >/dev/null
  resident=$("$tool" residency "${files[@]}")
  cold=$(start_to_healthy)
  "$tool" evict "${files[@]}" >/dev/null
  prewarm=$("$tool" prewarm "${files[@]}" | awk '{print $(NF-1)}')
  warm=$(start_to_healthy)
  ratio=$(python3 -c "print('%.2f' % ($warm / $cold))")
  printf '%4d  %14s  %14s  %10s  %10s   (%s before the cold start)\n' "$rep" "$cold" "$prewarm" "$warm" "$ratio" "$resident"
  cold_all+=("$cold") warm_all+=("$warm")
done
python3 - "${cold_all[*]}" "${warm_all[*]}" <<'PY'
import statistics, sys
cold = [float(x) for x in sys.argv[1].split()]
warm = [float(x) for x in sys.argv[2].split()]
print("median: cold start %.3f s, after a prewarm %.3f s: %.2fx" %
      (statistics.median(cold), statistics.median(warm), statistics.median(warm) / statistics.median(cold)))
PY
