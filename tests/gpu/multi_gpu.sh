#!/usr/bin/env bash
# Issue 43's device run in one call (at most 600 s) on a machine with two GPUs or more: builds
# llama.cpp with CUDA as llama_gpu.sh does (the same $WORK/llama, kept per commit: a warm machine
# that ran llama_gpu.sh or this builds nothing), writes a small random-weight GGUF (about 1.7 GB
# in F16: loads in a second or two) while it builds, then runs multi_gpu.py's four parts: a model
# split over GPUs 0 and 1, two services on disjoint GPUs, moves between GPU sets, an overcommitted
# plan refused. NCCL_NVLS_ENABLE=0 for every process.
#
#   tests/gpu/multi_gpu.sh [CARRY] [--rehearse]
#
# CARRY: what tests/gpu/llama_carry.sh gathered (build-gpu). --rehearse: on the CPU machine, with
# the CPU llama-server (LLAMA_BIN, default the project's /var/cache/berth/llama.cpp build), the
# fake NVML of two GPUs (FAKE_NVML_LIB, default build/tests/fake_nvml/full), a 38 MB model and
# small GPUs: a check of the script, not a figure.
# The device call, from the repository root (run, kind nvidia-h100-x2, carry ["build-gpu"]):
#   timeout 580 tests/gpu/multi_gpu.sh build-gpu; tar czf /tmp/mg.tgz -C $OUT . &&
#   find $OUT -mindepth 1 ! -name figures.txt ! -name run.log -delete && mv /tmp/mg.tgz $OUT/
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
REHEARSE=0
args=()
for a in "$@"; do [[ $a == --rehearse ]] && REHEARSE=1 || args+=("$a"); done
CARRY=$(realpath "${args[0]:-build-gpu}")
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
if ((REHEARSE)); then
  export REHEARSE=1 WORK=${WORK:-/tmp/berth-multi-gpu-rehearse}
  export LLAMA_BIN=${LLAMA_BIN:-/var/cache/berth/llama.cpp/build-80fb11a/bin}
  export FAKE_NVML_LIB=${FAKE_NVML_LIB:-$here/build/tests/fake_nvml/full}
  export GGUF_FLAGS=${GGUF_FLAGS:---embd 256 --layers 4 --ff 512 --heads 4 --kv 2 --ctx 2048}
  export NGL=${NGL:-0} CTX=${CTX:-2048} NP=${NP:-2} FAKE_GPU_BYTES=${FAKE_GPU_BYTES:-2147483648}
  export PORT=${PORT:-18551}
fi
WORK=$(mkdir -p "${WORK:-$here/build-gpu-llama}" && realpath "${WORK:-$here/build-gpu-llama}")
export WORK
RES=${OUT:-$WORK/out}
mkdir -p "$RES"
exec > >(tee -a "$RES/run.log") 2>&1
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
fig() { echo "$1=$2" | tee -a "$RES/figures.txt"; }
t_all=$(now)

if ((!REHEARSE)); then
  nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
  nvidia-smi topo -m 2>&1 | head -5
  fig cards "\"$(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs)\""
  (($(nvidia-smi -L | wc -l) >= 2)) || { echo "multi_gpu: fewer than two GPUs" >&2; exit 1; }
fi
cp "$CARRY/berth.commit" "$RES/" 2>/dev/null
# A claim that fits an empty GPU but not one where a small service runs: GPU 1's total less
# HEADROOM_MIB, under one service's claim (about 2.4 GiB for the 1.7 GB model; 0.8 GiB rehearsed)
# and over what the driver holds of an empty card (about 0.5 GiB).
if ((REHEARSE)); then
  total_mib=$((FAKE_GPU_BYTES >> 20)) HEADROOM_MIB=${HEADROOM_MIB:-640}
else
  total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 1)
fi
HEADROOM_MIB=${HEADROOM_MIB:-1536}
export OVER_GPU_MEMORY=${OVER_GPU_MEMORY:-$((total_mib - HEADROOM_MIB))MiB}
export BIG_GPU_MEMORY=${BIG_GPU_MEMORY:-$((total_mib - HEADROOM_MIB))MiB}
fig mg_big_claim "$BIG_GPU_MEMORY"

# llama.cpp's source (make_gguf.py reads its gguf-py and vocabulary), then its CUDA build, as
# llama_gpu.sh does and into the same folder, in the background while the GGUF is written.
src_commit=$(cat "$CARRY/llama-src.commit")
if [[ $(cat "$WORK/src.commit" 2>/dev/null) != "$src_commit" ]]; then
  rm -rf "$WORK/src" && mkdir -p "$WORK/src"
  tar xJf "$CARRY/llama-src.tar.xz" -C "$WORK/src" && echo "$src_commit" >"$WORK/src.commit"
fi
build_pid=
if [[ -z ${LLAMA_BIN:-} && $(cat "$WORK/llama/commit" 2>/dev/null) != "$src_commit" ]]; then
  echo "== build llama.cpp $src_commit with CUDA"
  (
    rm -rf "$WORK/llama"
    t0=$(now)
    gen=()
    command -v ninja >/dev/null && gen=(-G Ninja)
    export GIT_CEILING_DIRECTORIES=$WORK
    timeout 400 cmake -S "$WORK/src" -B "$WORK/llama" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF >"$RES/build.log" 2>&1 &&
      timeout 400 cmake --build "$WORK/llama" -j "$(nproc)" \
        --target llama-server llama-bench llama-fit-params >>"$RES/build.log" 2>&1 &&
      echo "$src_commit" >"$WORK/llama/commit" && fig mg_build_s "$(since "$t0")"
  ) &
  build_pid=$!
fi
python3 "$here/tests/gpu/multi_gpu.py" "$CARRY" --models-only
if [[ -n $build_pid ]]; then
  wait "$build_pid" || { tail -30 "$RES/build.log"; echo "multi_gpu: build failed" >&2; exit 1; }
fi
python3 "$here/tests/gpu/multi_gpu.py" "$CARRY"
rc=$?
fig mg_total_s "$(since "$t_all")"
exit $rc
