#!/usr/bin/env bash
# Issue 42's whole device run in one call of the device tool (at most 600 s): llama_gpu.sh
# (build, memory, starts, bench, attribution), llama_refuse.sh (a context that does not fit), then
# llama_switch.py (the dark window of a stop-first switch). chat-b's GGUF for llama_switch.py is
# written while llama.cpp builds. Everything lands in $OUT (or $WORK/out).
#
#   tests/gpu/llama_all.sh [CARRY]      CARRY: what tests/gpu/llama_carry.sh gathered (build-gpu)
#
# The knobs are llama_gpu.sh's (environment). The device call, from the repository root:
#   timeout 580 tests/gpu/llama_all.sh build-gpu; tar czf /tmp/all.tgz -C $OUT . &&
#   find $OUT -mindepth 1 ! -name figures.txt -delete && mv /tmp/all.tgz $OUT/
# (a call brings back at most 8 files).
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
CARRY=${1:-build-gpu}
WORK=$(mkdir -p "${WORK:-$here/build-gpu-llama}" && realpath "${WORK:-$here/build-gpu-llama}")
RES=${OUT:-$WORK/out}
export PYTHONUNBUFFERED=1
mkdir -p "$RES"
nvidia-smi -L >"$RES/card.txt" 2>&1
cp "$CARRY/berth.commit" "$RES/" 2>/dev/null
(
  for _ in $(seq 300); do [[ -e $WORK/src.commit ]] && break; sleep 1; done
  "$here/tests/gpu/llama_switch.py" "$CARRY" --models-only >"$RES/switch-models.log" 2>&1
) &
"$here/tests/gpu/llama_gpu.sh" "$CARRY"
wait
"$here/tests/gpu/llama_refuse.sh" "$CARRY" >"$RES/refuse.log" 2>&1
"$here/tests/gpu/llama_switch.py" "$CARRY"
