#!/usr/bin/env bash
# On the GPU machine: `berth observe` itself (text and -o json) while a torch process holds
# GiB GiB on GPU INDEX inside a cgroup named like a systemd unit (vllm-demo.service), so the
# attribution berth prints is the one it makes on a host where systemd started the server.
#   tests/gpu/observe_demo.sh BERTH [GPU_INDEX [GIB]]
# BERTH's missing libraries (Debian 12's libyaml-cpp.so.0.7) go in LD_LIBRARY_PATH.
set -euo pipefail
BERTH=$(realpath "$1")
GPU=${2:-0}
GIB=${3:-16}
CG=/sys/fs/cgroup/system.slice/vllm-demo.service
WORK=$(mktemp -d)
cleanup() {
  [[ -n ${HOLDER:-} ]] && kill "$HOLDER" 2>/dev/null && wait "$HOLDER" 2>/dev/null || true
  [[ -d $CG ]] && rmdir "$CG" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$CG"
UUID=$(nvidia-smi --query-gpu=index,uuid --format=csv,noheader | awk -F', ' -v g="$GPU" '$1==g{print $2}')
CUDA_VISIBLE_DEVICES=$UUID python3 -c '
import sys, time, torch
x = torch.empty(int(float(sys.argv[1]) * 2**30), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize(); open(sys.argv[2], "w").close(); time.sleep(600)' "$GIB" "$WORK/ready" &
HOLDER=$!
echo "$HOLDER" > "$CG/cgroup.procs"
for _ in $(seq 600); do [[ -e $WORK/ready ]] && break; sleep 0.1; done
[[ -e $WORK/ready ]] || { echo "holder did not start" >&2; exit 2; }
echo "== holder pid $HOLDER in $(cat /proc/$HOLDER/cgroup)"
echo "== nvidia-smi"
nvidia-smi --query-gpu=index,uuid,memory.total,memory.used --format=csv
nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv
echo "== berth observe"
"$BERTH" observe
echo "== berth observe -o json (gpus)"
"$BERTH" observe -o json | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["gpus"], indent=1))'
