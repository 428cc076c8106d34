#!/usr/bin/env bash
# Global flags work before and after the subcommand, as the README shows them; an unknown flag
# is still refused. The common flags (--state-dir, --bus, --nvml-library) are accepted by every
# command, and the commands that read berth's records honour --state-dir.
set -euo pipefail
berth=${1:?berth binary}; src=${2:?source dir}
m="$src/manifests/examples/single-gpu"
"$berth" --log-level debug validate -f "$m" >/dev/null
"$berth" validate -f "$m" --log-level debug >/dev/null
"$berth" validate --log-level=info -f "$m" >/dev/null
if "$berth" validate -f "$m" --no-such-flag 2>/dev/null; then
  echo "an unknown flag after the subcommand was accepted" >&2; exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--state-dir "$tmp/state" --bus "unix:path=$tmp/no-bus" --nvml-library "$tmp/no-nvml.so")
fail=0
# Every command and nested command takes them: its --help lists each.
mapfile -t commands < <("$berth" --help | awk '/^Subcommands:|^SUBCOMMANDS:/{s=1; next} s && /^  [a-z]/{print $1} s && /^$/{s=0}')
for cmd in "${commands[@]}"; do
  [[ $cmd == completion ]] && continue
  mapfile -t subs < <("$berth" "$cmd" --help | awk '/^Subcommands:|^SUBCOMMANDS:/{s=1; next} s && /^  [a-z]/{print $1} s && /^$/{s=0}')
  targets=("$cmd")
  ((${#subs[@]})) && targets=() && for sub in "${subs[@]}"; do targets+=("$cmd $sub"); done
  for t in "${targets[@]}"; do
    # shellcheck disable=SC2086
    help=$("$berth" $t --help)
    for flag in --state-dir --bus --nvml-library; do
      grep -qE -- "^ +$flag( |$)" <<<"$help" || { echo "berth $t does not take $flag" >&2; fail=1; }
    done
  done
done
# Where they do not matter they are accepted: validate, render and fleet status parse them.
"$berth" validate -f "$m" "${common[@]}" >/dev/null
HF_HUB_OFFLINE=1 "$berth" render -f "$m" "${common[@]}" >/dev/null
out=$("$berth" fleet status -f "$m" "${common[@]}" 2>&1 || true)
grep -q "has no fleet: section" <<<"$out" || { echo "fleet status refused the common flags: $out" >&2; fail=1; }
# history reads the state dir it is given, and no other.
mkdir -p "$tmp/state"
cat >"$tmp/state/history.json" <<'JSON'
{"format_version": 1, "applies": [{"started": "2026-12-01T03:00:00Z", "duration_ms": 1200,
 "manifest_digest": "abcdef0123456789", "manifest_git_commit": "", "outcome": "applied",
 "message": "", "actions": ["start service/chat"], "steps_done": 1, "rolled_back": false}]}
JSON
out=$("$berth" history "${common[@]}")
grep -q "start service/chat" <<<"$out" || { echo "berth history --state-dir did not read $tmp/state: $out" >&2; fail=1; }
out=$("$berth" history --state-dir "$tmp/empty" --bus "unix:path=$tmp/no-bus")
grep -q "No applies recorded yet" <<<"$out" || { echo "berth history read another state dir: $out" >&2; fail=1; }
((fail == 0)) || exit 1
echo "global flags accepted before and after the subcommand; unknown flags refused; every command takes the common flags"
