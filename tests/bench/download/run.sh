#!/usr/bin/env bash
# The download benchmark: berth pull against aria2c and curl, from a loopback "Hub" whose CDN is
# nginx, uncapped and with every connection capped at 40m/s (nginx limit_rate), next to the
# machine's own limits (dd write with fdatasync, openssl sha256). See README.md beside this file.
#
#   tests/bench/download/run.sh [--size-gib N] [--berth PATH] [--cache DIR] [--rate 40m]
#
#   --size-gib N   the four safetensors files together (default 4: four 1 GiB files)
#   --berth PATH   the berth binary (default: $BERTH, build/berth, else built into build-bench/)
#   --cache DIR    where the repo is materialized once and reused, and where the downloads go
#                  (default: $BERTH_BENCH_CACHE or /var/tmp/berth-bench-download)
#   --rate R       the per-connection cap of the capped setting, in nginx syntax (default 40m)
#   --settings S   which settings to run, space-separated (default "uncapped capped")
#   --tools T      which contenders to run, space-separated (default "berth aria2c curl")
#   --no-limits    skip the machine limits (dd, openssl) and the CDN-alone figures: a quick run
#   --wrap CMD     run berth under CMD (word-split), e.g. "strace -c -f -o /tmp/berth.strace"
#
# Installs nginx-light, aria2, time and curl with apt-get when missing; nothing else touches the
# network. A measurement, not a test: exits 0 whatever the numbers (PASS/MISS lines say how they
# compare with the bar), non-zero only when something failed to run.
set -euo pipefail
umask 022

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
SIZE_GIB=4
BERTH_BIN=${BERTH:-}
CACHE=${BERTH_BENCH_CACHE:-/var/tmp/berth-bench-download}
RATE=40m
SETTINGS="uncapped capped"
TOOLS="berth aria2c curl"
LIMITS=1
WRAP=
while [ $# -gt 0 ]; do
  case "$1" in
    --size-gib) SIZE_GIB=$2; shift 2 ;;
    --berth) BERTH_BIN=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --settings) SETTINGS=$2; shift 2 ;;
    --tools) TOOLS=$2; shift 2 ;;
    --no-limits) LIMITS=0; shift ;;
    --wrap) WRAP=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
FILE_MIB=$(awk -v g="$SIZE_GIB" 'BEGIN { m = int(g * 1024 / 4); if (m < 1) m = 1; print m }')
log() { echo "== $*" >&2; }

# --- tools --------------------------------------------------------------------------------------
need=()
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v aria2c >/dev/null || need+=(aria2)
[ -x /usr/bin/time ] || need+=(time)
command -v curl >/dev/null || need+=(curl)
command -v openssl >/dev/null || need+=(openssl)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  log "installing ${need[*]} with apt-get"
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

if [ -z "$BERTH_BIN" ]; then
  if [ -x "$ROOT/build/berth" ]; then
    BERTH_BIN=$ROOT/build/berth
  else
    log "building berth into $ROOT/build-bench"
    cmake -S "$ROOT" -B "$ROOT/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$ROOT/build-bench" --target berth >/dev/null
    BERTH_BIN=$ROOT/build-bench/berth
  fi
fi
[ -x "$BERTH_BIN" ] || { echo "run.sh: no berth binary at $BERTH_BIN" >&2; exit 2; }

# --- disk ---------------------------------------------------------------------------------------
mkdir -p "$CACHE"
chmod 755 "$CACHE"
REPO_BYTES=$((4 * FILE_MIB * 1024 * 1024))
cached=0
if [ -d "$CACHE/cdn" ]; then cached=$(find "$CACHE/cdn" -type f -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}'); fi
# The repo (materialized once), one download at a time, and the dd file of the same size.
needed=$((3 * REPO_BYTES - cached))
free=$(($(df -P -k "$CACHE" | awk 'NR==2 {print $4}') * 1024))
if [ "$free" -lt "$needed" ]; then
  awk -v d="$CACHE" -v f="$free" -v r="$REPO_BYTES" -v c="$cached" 'BEGIN { printf "run.sh: %s has %.1f GiB free; this benchmark needs 3x the repo size (%.1f GiB, less %.1f GiB\n", d, f / 2^30, 3 * r / 2^30, c / 2^30 }' >&2
  echo "already materialized). Free some space, or pick --cache DIR elsewhere, or a smaller --size-gib." >&2
  exit 3
fi

# --- repo ---------------------------------------------------------------------------------------
log "repo: 4 x $FILE_MIB MiB safetensors + small files, cached in $CACHE"
RUN=$CACHE/run
rm -rf "$RUN"
mkdir -p "$RUN"
python3 "$HERE/make_repo.py" --cache "$CACHE" --file-mib "$FILE_MIB" >"$RUN/repo.json"
mapfile -t FILES < <(python3 -c 'import json,sys; [print(f["path"]) for f in json.load(open(sys.argv[1]))["files"]]' "$RUN/repo.json")
mapfile -t CDN_FILES < <(python3 -c 'import json,sys; [print(p) for p in json.load(open(sys.argv[1]))["cdn_files"]]' "$RUN/repo.json")
TOTAL_BYTES=$(python3 -c 'import json,sys; print(sum(f["size"] for f in json.load(open(sys.argv[1]))["files"]))' "$RUN/repo.json")
REPO_ID=bench/model
cat "${CDN_FILES[@]}" >/dev/null  # the CDN serves from the page cache, as a real one from RAM/SSD

# --- servers ------------------------------------------------------------------------------------
NGINX_PID=; FAKE_PID=
cleanup() {
  set +e
  [ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null && wait "$NGINX_PID" 2>/dev/null
  [ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null && wait "$FAKE_PID" 2>/dev/null
  rm -rf "$CACHE/dl" "$CACHE/dd.bin"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# nginx on 127.0.0.2:P and the fake's own CDN listener on 127.0.0.1:P: the fake's 302s name
# --cdn-host 127.0.0.2 and --cdn-port P, so they land on nginx, which serves /repos/AA/BB/<sha256>
# (the fake's CDN path layout; the signed query string is ignored) from the materialized files.
CDN_PORT=$(python3 - <<'EOF'
import socket
for _ in range(100):
    a = socket.socket(); a.bind(("127.0.0.2", 0)); port = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        a.close(); b.close()
    print(port); break
EOF
)
CDN=http://127.0.0.2:$CDN_PORT

start_nginx() {  # $1: limit_rate value (0 = none)
  mkdir -p "$RUN/nginx/logs"
  cat >"$RUN/nginx/nginx.conf" <<EOF
worker_processes 2;
daemon off;
pid $RUN/nginx/nginx.pid;
error_log $RUN/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  keepalive_timeout 60s;
  default_type application/octet-stream;
  server {
    listen 127.0.0.2:$CDN_PORT reuseport;
    root $CACHE/cdn;
    location /repos/ { limit_rate $1; }
  }
}
EOF
  "$NGINX" -p "$RUN/nginx" -e "$RUN/nginx/error.log" -c "$RUN/nginx/nginx.conf" &
  NGINX_PID=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "$CDN/" && return 0
    sleep 0.05
  done
  echo "run.sh: nginx did not start:" >&2; cat "$RUN/nginx/error.log" >&2; exit 4
}
stop_nginx() {
  kill "$NGINX_PID"; wait "$NGINX_PID" 2>/dev/null || true; NGINX_PID=
}

python3 "$ROOT/tests/fake_hub/fake_hub.py" --repos "$CACHE/repos" --host 127.0.0.1 \
  --cdn-host 127.0.0.2 --cdn-port "$CDN_PORT" >"$RUN/fake.json" 2>"$RUN/fake.err" &
FAKE_PID=$!
for _ in $(seq 600); do
  [ -s "$RUN/fake.json" ] && break
  kill -0 "$FAKE_PID" 2>/dev/null || { echo "run.sh: the fake Hub failed:" >&2; cat "$RUN/fake.err" >&2; exit 4; }
  sleep 0.1
done
API=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["api"])' "$RUN/fake.json")
log "fake Hub API $API, CDN (nginx) $CDN"

# --- measuring ----------------------------------------------------------------------------------
RESULTS=$RUN/results.tsv
: >"$RESULTS"
FAILED=0
now() { date +%s.%N; }
mb_s() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / s / 1e6 }'; }

# run_timed SETTING NAME DEST -- CMD...: CMD into the fresh DEST, then sync, all timed.
run_timed() {
  local setting=$1 name=$2 dest=$3; shift 4
  rm -rf "$CACHE/dl"; sync
  mkdir -p "$dest"
  local tf=$RUN/time.$setting.$name rc=0 t0 t1 t2
  log "$setting: $name"
  t0=$(now)
  /usr/bin/time -v -o "$tf" "$@" >"$RUN/$setting.$name.log" 2>&1 || rc=$?
  t1=$(now)
  sync
  t2=$(now)
  local got
  got=$(find "$dest" -type f ! -name '*.lock' ! -name '*.aria2' -printf '%s\n' | awk '{s+=$1} END {printf "%.0f\n", s}')
  local user sys rss
  user=$(awk -F': ' '/User time/ {print $2}' "$tf")
  sys=$(awk -F': ' '/System time/ {print $2}' "$tf")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tf")
  local ok=1
  if [ "$rc" != 0 ] || [ "$got" -lt "$TOTAL_BYTES" ]; then
    ok=0; FAILED=1
    echo "run.sh: $setting $name failed (exit $rc, $got of $TOTAL_BYTES bytes); its log:" >&2
    tail -20 "$RUN/$setting.$name.log" >&2
  fi
  printf 'run\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$setting" "$name" "$TOTAL_BYTES" \
    "$(awk -v a="$t0" -v b="$t2" 'BEGIN {print b - a}')" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" \
    "$user" "$sys" "$rss" "$ok" >>"$RESULTS"
  rm -rf "$CACHE/dl"
}

cdn_alone() {  # SETTING: one connection, then 16 at once, all to /dev/null
  local setting=$1 url1 one_bytes
  url1="$CDN/repos/${CDN_FILES[0]#"$CACHE/cdn/repos/"}"
  one_bytes=$((FILE_MIB * 1024 * 1024))
  [ "$setting" = capped ] && one_bytes=$((one_bytes < 268435456 ? one_bytes : 268435456))
  local t0 t1
  t0=$(now); curl -sS -o /dev/null -r "0-$((one_bytes - 1))" "$url1"; t1=$(now)
  printf 'cdn\t%s\tone connection\t%s\t%s\n' "$setting" "$one_bytes" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" >>"$RESULTS"
  log "$setting: CDN alone, one connection: $(mb_s "$one_bytes" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')") MB/s"
  # 16 connections: four ranges of each file (capped: 64 MiB of each range, enough to see the rate).
  local part=$((FILE_MIB * 1024 * 1024 / 4)) take total=0 pids=()
  take=$part; [ "$setting" = capped ] && take=$((part < 67108864 ? part : 67108864))
  t0=$(now)
  for f in "${CDN_FILES[@]}"; do
    for q in 0 1 2 3; do
      curl -sS -o /dev/null -r "$((q * part))-$((q * part + take - 1))" "$CDN/repos/${f#"$CACHE/cdn/repos/"}" &
      pids+=($!)
      total=$((total + take))
    done
  done
  wait "${pids[@]}"
  t1=$(now)
  printf 'cdn\t%s\t16 connections\t%s\t%s\n' "$setting" "$total" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" >>"$RESULTS"
  log "$setting: CDN alone, 16 connections: $(mb_s "$total" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')") MB/s"
}

ARIA_INPUT=$RUN/aria2-input.txt
CURL_LIST=$RUN/curl-list.txt
: >"$ARIA_INPUT"; : >"$CURL_LIST"
for f in "${FILES[@]}"; do
  printf '%s/%s/resolve/main/%s\n  out=%s\n' "$API" "$REPO_ID" "$f" "$f" >>"$ARIA_INPUT"
  printf '%s/%s/resolve/main/%s\t%s\n' "$API" "$REPO_ID" "$f" "$f" >>"$CURL_LIST"
done

contender() {  # SETTING TOOL
  local setting=$1 d=$CACHE/dl/$2
  case "$2" in
    berth)
      # shellcheck disable=SC2086  # WRAP is a command line, split on purpose
      run_timed "$setting" berth "$d" -- env -u HF_TOKEN -u HF_HUB_CACHE -u HF_HOME HF_ENDPOINT="$API" \
        $WRAP "$BERTH_BIN" pull "hf://$REPO_ID" --store "$d" ;;
    aria2c)
      run_timed "$setting" aria2c "$d" -- aria2c -x8 -s8 -j4 -i "$ARIA_INPUT" -d "$d" \
        --console-log-level=warn --summary-interval=0 --download-result=hide ;;
    curl)
      run_timed "$setting" curl "$d" -- bash -c 'while IFS=$'"'\t'"' read -r url out; do
          curl -sS -L -o "$1/$out" "$url" || exit 1; done <"$2"' _ "$d" "$CURL_LIST" ;;
    *) echo "run.sh: unknown tool $2" >&2; exit 2 ;;
  esac
}

for setting in $SETTINGS; do
  if [ "$setting" = uncapped ]; then start_nginx 0; else start_nginx "$RATE"; fi
  if [ "$LIMITS" = 1 ]; then cdn_alone "$setting"; fi
  for tool in $TOOLS; do contender "$setting" "$tool"; done
  stop_nginx
done

# --- the machine's own limits, over the same byte count -----------------------------------------
machine_limits() {
log "machine: dd write with fdatasync, $TOTAL_BYTES bytes"
COUNT=$(((TOTAL_BYTES + 16777215) / 16777216))
sync
t0=$(now)
dd if=/dev/zero of="$CACHE/dd.bin" bs=16M count="$COUNT" conv=fdatasync status=none
t1=$(now)
printf 'limit\tdd write (fdatasync)\t%s\t%s\n' "$((COUNT * 16777216))" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" >>"$RESULTS"
rm -f "$CACHE/dd.bin"
log "machine: openssl dgst -sha256 over the four files (one core, then all cores)"
HASH_BYTES=$((4 * FILE_MIB * 1024 * 1024))
t0=$(now); openssl dgst -sha256 "${CDN_FILES[@]}" >/dev/null; t1=$(now)
printf 'limit\tsha256, one core\t%s\t%s\n' "$HASH_BYTES" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" >>"$RESULTS"
t0=$(now); printf '%s\0' "${CDN_FILES[@]}" | xargs -0 -n1 -P"$(nproc)" openssl dgst -sha256 >/dev/null; t1=$(now)
printf 'limit\tsha256, %s cores\t%s\t%s\n' "$(nproc)" "$HASH_BYTES" "$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" >>"$RESULTS"
}
if [ "$LIMITS" = 1 ]; then machine_limits; fi

python3 "$HERE/report.py" "$RESULTS" --rate "$RATE" --berth "$BERTH_BIN" --nproc "$(nproc)"
if [ "$FAILED" != 0 ]; then
  echo "run.sh: a contender failed to run (see above); logs in $RUN" >&2
  exit 1
fi
