#!/usr/bin/env bash
# The no-op benchmark: `berth plan` on a converged host against `ansible-playbook --check` of the
# equivalent playbook, both looking at the same real systemd (booted in a sandbox,
# tests/sandbox/sdsandbox.sh) with N fake-vLLM services running and N models in the store.
# See README.md beside this file.
#
#   tests/bench/noop/run.sh [--sizes 10,50,200] [--reps 7] [--ansible-reps 3] [--berth PATH]
#                           [--work DIR] [--profile N] [--keep]
#
#   --sizes L         numbers of models+services, comma-separated (default 10,50,200)
#   --reps R          berth plan runs per size; the median is reported (default 7)
#   --ansible-reps R  ansible-playbook --check runs per size (default 3; 1 at N >= 200)
#   --berth PATH      the berth binary (default: $BERTH, build/berth, else built into build-bench/)
#   --work DIR        scratch dir: stores, manifests, playbooks, logs, results (default
#                     /var/tmp/berth-bench-noop); results.txt and profile/ stay there
#   --profile N       also profile one `berth plan` at size N with callgrind and strace
#                     (default 50 when 50 is among the sizes; 0: no profile)
#   --keep            leave the stores and logs of each size in DIR (default: removed)
#
# Must run as root (the sandbox needs it). Installs ansible-core (and valgrind/strace for
# --profile) with apt-get when missing. Every sandbox is stopped on exit, error or Ctrl-C.
# A measurement, not a test: exits 0 whatever the numbers (PASS/MISS say how they compare with
# the bar: 100x faster than Ansible), non-zero only when something failed to run.
set -euo pipefail
umask 022

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
SIZES=10,50,200
REPS=7
AREPS=
BERTH_BIN=${BERTH:-}
WORK=/var/tmp/berth-bench-noop
PROFILE=
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) SIZES=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --ansible-reps) AREPS=$2; shift 2 ;;
    --berth) BERTH_BIN=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
IFS=, read -ra SIZE_LIST <<<"$SIZES"
if [ -z "$PROFILE" ]; then PROFILE=0; for n in "${SIZE_LIST[@]}"; do [ "$n" = 50 ] && PROFILE=50; done; fi
log() { echo "== $*" >&2; }
[ "$(id -u)" = 0 ] || { echo "run.sh: must run as root (the systemd sandbox needs it)" >&2; exit 2; }

# --- tools --------------------------------------------------------------------------------------
need=()
command -v ansible-playbook >/dev/null || need+=(ansible-core)
if [ "$PROFILE" != 0 ]; then
  command -v valgrind >/dev/null || need+=(valgrind)
  command -v strace >/dev/null || need+=(strace)
fi
command -v nsenter >/dev/null || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]} with apt-get"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
fi
if [ -z "$BERTH_BIN" ]; then
  if [ -x "$ROOT/build/berth" ]; then
    BERTH_BIN=$ROOT/build/berth
  else
    log "building berth into $ROOT/build-bench (RelWithDebInfo: the project default, -O2 -g)"
    cmake -S "$ROOT" -B "$ROOT/build-bench" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
    cmake --build "$ROOT/build-bench" --target berth >/dev/null
    BERTH_BIN=$ROOT/build-bench/berth
  fi
fi
[ -x "$BERTH_BIN" ] || { echo "run.sh: no berth binary at $BERTH_BIN" >&2; exit 2; }
SDSB=$ROOT/tests/sandbox/sdsandbox.sh
FAKE_VLLM=$ROOT/tests/fake_vllm/fake_vllm.py
MW="python3 $HERE/make_world.py"

# --- sandbox lifecycle: always stopped ----------------------------------------------------------
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
export SDSB_BASE=$WORK/sandboxes SDSB_OWNER=$$
mkdir -p "$SDSB_BASE"
SANDBOX=
cleanup() {
  local rc=$?
  if [ -n "$SANDBOX" ]; then bash "$SDSB" stop "$SANDBOX" >/dev/null 2>&1 || bash "$SDSB" stop "$SANDBOX" || true; fi
  bash "$SDSB" stop-all --orphans --prune >/dev/null 2>&1 || true
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_ports() {  # N ports from 31000 up that nobody listens on or binds now
  python3 - "$1" <<'PY'
import socket, sys
n, out, p = int(sys.argv[1]), [], 31000
while len(out) < n and p < 65000:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); out.append(str(p))
    except OSError:
        pass
    finally:
        s.close()
    p += 1
print(",".join(out))
PY
}
field() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }

RESULTS=$WORK/results.txt
: >"$RESULTS.rows"
log "berth: $BERTH_BIN; $(ansible-playbook --version 2>/dev/null | sed -n 1p); $(nproc) cores; work dir $WORK"

for N in "${SIZE_LIST[@]}"; do
  D=$WORK/n$N
  rm -rf "$D"; mkdir -p "$D"
  SANDBOX=noop-$$-$N
  log "N=$N: booting sandbox $SANDBOX"
  bash "$SDSB" start "$SANDBOX" --timeout 60 >"$D/sandbox.log" 2>&1 || { cat "$D/sandbox.log" >&2; exit 1; }
  # shellcheck disable=SC1090
  source "$SDSB_BASE/$SANDBOX/env"
  BUS=$SDSB_SYSTEM_BUS_ADDRESS
  JOURNAL=$SDSB_ROOT/run/log/journal
  UNITS=$SDSB_UNITS

  log "N=$N: $N fake models in $D/store, manifest with $N vllm services"
  $MW models --n "$N" --store "$D/store"
  PORTS=$(free_ports "$N")
  $MW manifest --n "$N" --store "$D/store" --unit-dir "$UNITS" --vllm "$FAKE_VLLM" \
      --ports "$PORTS" --out "$D/berth.yaml"

  log "N=$N: berth apply (converging: $N units, $N fake vLLM servers, wait healthy)"
  t0=$(date +%s.%N)
  "$BERTH_BIN" apply -f "$D/berth.yaml" --yes --bus "$BUS" --journal-dir "$JOURNAL" \
      --state-dir "$D/state" >"$D/apply.log" 2>&1 || { tail -30 "$D/apply.log" >&2; exit 1; }
  APPLY_S=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
  running=$(bash "$SDSB" exec "$SANDBOX" systemctl list-units --state=running --no-legend 'svc-*' | wc -l)
  log "N=$N: converged in ${APPLY_S}s; $running svc-* units running"
  [ "$running" = "$N" ] || { echo "run.sh: expected $N running services, got $running" >&2; exit 1; }

  PLAN=("$BERTH_BIN" plan -f "$D/berth.yaml" --bus "$BUS" --state-dir "$D/state" --detailed-exitcode)
  "${PLAN[@]}" >"$D/plan.txt" 2>&1 || { cat "$D/plan.txt" >&2; echo "run.sh: the plan after apply is not empty" >&2; exit 1; }
  grep -q "No changes" "$D/plan.txt" || { cat "$D/plan.txt" >&2; exit 1; }
  log "N=$N: berth plan x$REPS"
  BJ=$(python3 "$HERE/timeit.py" "$REPS" "$D/plan-last.txt" -- "${PLAN[@]}")
  echo "$BJ" >"$D/berth-times.json"
  grep -q "No changes" "$D/plan-last.txt" || { cat "$D/plan-last.txt" >&2; exit 1; }

  # The same world for Ansible: one Jinja template rendered byte-identical to berth's units.
  $MW ansible --n "$N" --store "$D/store" --unit-dir "$UNITS" --out-dir "$D/ansible"
  # ansible-playbook runs inside the sandbox's namespaces (sdsandbox.sh exec): there systemctl
  # reaches the sandbox's PID 1 over /run/systemd/private and /run/systemd/system exists, while
  # the file system (store, unit dir path, ansible itself, /root/.ansible) is the host's.
  AP=(bash "$SDSB" exec "$SANDBOX" env ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=0
      ANSIBLE_INVENTORY_UNPARSED_WARNING=0 ANSIBLE_RETRY_FILES_ENABLED=0
      ansible-playbook -i localhost, --check "$D/ansible/playbook.yml")
  ar=${AREPS:-3}; if [ -z "$AREPS" ] && [ "$N" -ge 200 ]; then ar=1; fi
  log "N=$N: ansible-playbook --check x$ar"
  AJ=$(python3 "$HERE/timeit.py" "$ar" "$D/ansible-last.txt" -- "${AP[@]}")
  echo "$AJ" >"$D/ansible-times.json"
  recap=$(grep -E '^localhost' "$D/ansible-last.txt" || true)
  echo "$recap" | grep -qE 'changed=0 .*failed=0' || { cat "$D/ansible-last.txt" >&2; echo "run.sh: Ansible found changes or failed: the worlds differ" >&2; exit 1; }
  okn=$(echo "$recap" | sed -E 's/.*ok=([0-9]+).*/\1/')

  B=$(field "$BJ" median); A=$(field "$AJ" median)
  printf '%s %s %s %s %s\n' "$N" "$B" "$A" "$APPLY_S" "$okn" >>"$RESULTS.rows"
  log "N=$N: berth plan median $(awk -v b="$B" 'BEGIN{printf "%.1f ms", b*1000}'), ansible --check $(awk -v a="$A" 'BEGIN{printf "%.1f s", a}') (recap: ok=$okn tasks, changed=0)"

  if [ "$PROFILE" = "$N" ]; then
    P=$WORK/profile; rm -rf "$P"; mkdir -p "$P"
    log "N=$N: profiling one berth plan (strace -c, strace -T, callgrind)"
    strace -f -c -o "$P/strace-c.txt" "${PLAN[@]}" >/dev/null 2>&1 || true
    strace -f -tt -T -o "$P/strace-T.txt" "${PLAN[@]}" >/dev/null 2>&1 || true
    valgrind --tool=callgrind --callgrind-out-file="$P/callgrind.out" "${PLAN[@]}" >/dev/null 2>"$P/valgrind.log" || true
    callgrind_annotate --inclusive=yes "$P/callgrind.out" 2>/dev/null | head -60 >"$P/callgrind-inclusive.txt" || true
    callgrind_annotate "$P/callgrind.out" 2>/dev/null | head -45 >"$P/callgrind-self.txt" || true
    # berth's own wall-clock phases (ltrace-free): time the plan with a saved observation too
    "$BERTH_BIN" observe -f "$D/berth.yaml" --bus "$BUS" -o json >"$P/observed.json" 2>/dev/null || true
    if [ -s "$P/observed.json" ]; then
      python3 "$HERE/timeit.py" "$REPS" "$P/plan-observed.txt" -- "$BERTH_BIN" plan -f "$D/berth.yaml" \
        --observed "$P/observed.json" --state-dir "$D/state" --detailed-exitcode >"$P/plan-observed-times.json" || true
    fi
  fi

  bash "$SDSB" stop "$SANDBOX" >>"$D/sandbox.log" 2>&1
  rm -rf "${SDSB_BASE:?}/$SANDBOX"
  SANDBOX=
  [ "$KEEP" = 1 ] || rm -rf "$D/store" "$D/state"
done

# --- report -------------------------------------------------------------------------------------
{
  echo "no-op benchmark: berth plan vs ansible-playbook --check, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "berth: $BERTH_BIN"
  echo "$(ansible-playbook --version 2>/dev/null | sed -n 1p)"
  printf '%6s %14s %14s %10s %16s %16s %10s\n' N "berth plan" "ansible" ratio "berth/service" "ansible/service" "apply(s)"
  awk '{ printf "%6d %11.1f ms %12.2f s %9.0fx %13.2f ms %13.1f ms %10.1f\n", $1, $2*1000, $3, $3/$2, $2*1000/$1, $3*1000/$1, $4 }' "$RESULTS.rows"
  awk 'NR==1 {n0=$1; b0=$2; a0=$3} {n=$1; b=$2; a=$3} END { if (n > n0) printf "growth %d -> %d: berth +%.2f ms/service (marginal), ansible +%.1f ms/service\n", n0, n, (b-b0)*1000/(n-n0), (a-a0)*1000/(n-n0) }' "$RESULTS.rows"
  awk '{ r=$3/$2; printf "N=%d: %s (%.0fx; bar 100x, aim 1000x)\n", $1, (r >= 100 ? "PASS" : "MISS"), r }' "$RESULTS.rows"
} | tee "$RESULTS"
