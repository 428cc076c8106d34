#!/usr/bin/env bash
# A llama-server context that does not fit the real GPU is refused by berth plan before anything
# stops, and one that fits plans (issue 42): berth (carried, as llama_gpu.sh's) plans the 8B F16
# model at -c 8192 and at -c 1048576 against the GPU NVML reports. No llama.cpp build: the plan
# derives the claim from the GGUF; nothing is started.
#
#   tests/gpu/llama_refuse.sh [CARRY]    CARRY: what tests/gpu/llama_carry.sh gathered (build-gpu)
#
# Writes plan-fits.txt, plan-refused.txt and their exit statuses to $OUT (or $WORK/out).
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=$(realpath "${1:-build-gpu}")
WORK=$(mkdir -p "${WORK:-$here/build-gpu-llama}" && realpath "${WORK:-$here/build-gpu-llama}")
RES=${OUT:-$WORK/out}
COMMIT=1111111111111111111111111111111111111111
mkdir -p "$RES" "$WORK/src" "$WORK/units" "$WORK/state"
PY=python3
$PY -c 'import numpy' 2>/dev/null || PY=/usr/bin/python3
berth() { LD_LIBRARY_PATH=$CARRY/lib timeout 120 "$CARRY/bin/berth" "$@"; }

[[ -e $WORK/src/gguf-py ]] || tar -xJf "$CARRY/llama-src.tar.xz" -C "$WORK/src"
SNAP=$WORK/store/models--org--m8b/snapshots/$COMMIT
if [[ ! -e $WORK/store/gguf.done ]]; then
  mkdir -p "$SNAP" "$WORK/store/models--org--m8b/refs"
  echo -n "$COMMIT" >"$WORK/store/models--org--m8b/refs/main"
  timeout 400 $PY "$here/tests/real_engine/make_gguf.py" --llama-src "$WORK/src" \
    --out "$SNAP/model.gguf" --f16 --embd 4096 --layers 32 --ff 14336 --heads 32 --kv 8 \
    --ctx 8192 || { echo "llama_refuse: the GGUF was not written" >&2; exit 1; }
  touch "$WORK/store/gguf.done"
fi

for case in fits:8192 refused:1048576; do
  name=${case%%:*} ctx=${case#*:}
  cat >"$WORK/berth-$name.yaml" <<EOF
berth: 1
host: {store: $WORK/store, unit_dir: $WORK/units, executables: {llama-server: /bin/true}}
models:
  m8b: {source: hf://org/m8b, revision: $COMMIT}
services:
  chat:
    model: m8b
    engine: llama-server
    gpus: [0]
    port: 18080
    llama_server: {model_file: model.gguf, n_gpu_layers: 99, ctx_size: $ctx, parallel: 16, alias: m8b}
EOF
  {
    nvidia-smi -L
    echo "\$ berth plan -f berth.yaml   # ctx_size: $ctx"
    berth plan -f "$WORK/berth-$name.yaml" --state-dir "$WORK/state"
    echo "exit status $?"
  } 2>&1 | tee "$RES/plan-$name.txt"
done
