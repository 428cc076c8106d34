#!/bin/bash
# Cold vs prewarmed start of llama-server on one GGUF file (issue 38): the seconds from its exec
# to /health answering 200 (loaded, warmed up), with the page cache dropped first; "prewarmed"
# reads the file into the page cache with berth's own code (page_cache_tool prewarm: the
# executor's Prewarm) before the start, and counts that read separately.
#
#   prewarm_start.sh LLAMA_SERVER PAGE_CACHE_TOOL FILE.gguf [ROUNDS]
#
# Drops the cache with /proc/sys/vm/drop_caches (root), else POSIX_FADV_DONTNEED on the file
# (page_cache_tool evict). Every wait is bounded (120 s).
set -euo pipefail
server=$1 tool=$2 file=$3 rounds=${4:-3}
port=${PORT:-18931}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
drop() {
  sync
  if ! (echo 1 >/proc/sys/vm/drop_caches) 2>/dev/null; then "$tool" evict "$file" >/dev/null; fi
}
start() {
  local t0 pid
  t0=$(now)
  "$server" -m "$file" --host 127.0.0.1 --port "$port" -c 2048 -np 1 >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 12000); do
    if curl -sf -m 1 "http://127.0.0.1:$port/health" >/dev/null 2>&1; then break; fi
    if ! kill -0 "$pid" 2>/dev/null; then cat "$log" >&2; exit 1; fi
    sleep 0.01
  done
  since "$t0"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

echo "file: $file ($(stat -c %s "$file") bytes)"
for r in $(seq "$rounds"); do
  drop
  echo "round $r: resident after drop: $("$tool" residency "$file" | tail -1)"
  cold=$(start)
  drop
  t0=$(now)
  "$tool" prewarm "$file" >/dev/null
  read_s=$(since "$t0")
  warm=$(start)
  echo "round $r: cold start ${cold} s; prewarm read ${read_s} s, then start ${warm} s"
done
