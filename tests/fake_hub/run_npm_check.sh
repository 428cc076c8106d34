#!/bin/bash
# run_npm_check.sh - fidelity check of the fake Hub with the real @huggingface/hub client (npm).
#
# Installs npm_check/node_modules when missing (npm ci, versions pinned by package-lock.json),
# builds the test repos (make_test_repos.py), starts fake_hub.py on loopback, runs
# npm_check/check.mjs against it, stops the hub. Exit status: 0 when every check passed.
# Needs node (>= 20) and npm: Debian packages nodejs and npm. Missing ones fail the check.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "run_npm_check.sh: FAIL: '$tool' is not installed (Debian: apt-get install nodejs npm)" >&2
    exit 1
  fi
done
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "run_npm_check.sh: FAIL: node $(node --version) is too old; @huggingface/hub needs node >= 20" >&2
  exit 1
fi

cd "$here/npm_check"
if [ ! -d node_modules/@huggingface/hub ]; then
  echo "run_npm_check.sh: installing @huggingface/hub (npm ci)"
  npm ci --no-audit --no-fund
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/fake-hub-npm.XXXXXX")
hub_pid=
cleanup() {
  if [ -n "$hub_pid" ]; then
    kill -TERM "$hub_pid" 2>/dev/null || true
    wait "$hub_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$python" "$here/make_test_repos.py" "$work/repos"
token=hf_fake_hub_npm_check
"$python" "$here/fake_hub.py" --repos "$work/repos" --token "$token" --gated org/gated \
  --page-size 7 --log "$work/requests.jsonl" >"$work/hub.out" 2>"$work/hub.err" &
hub_pid=$!
for _ in $(seq 1 100); do
  [ -s "$work/hub.out" ] && break
  if ! kill -0 "$hub_pid" 2>/dev/null; then
    echo "run_npm_check.sh: FAIL: fake_hub.py exited early:" >&2
    cat "$work/hub.err" >&2
    exit 1
  fi
  sleep 0.1
done
api=$("$python" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["api"])' "$work/hub.out")
echo "run_npm_check.sh: fake hub at $api (@huggingface/hub $(node -p 'require("./node_modules/@huggingface/hub/package.json").version'), node $(node --version))"

status=0
FAKE_HUB_API="$api" FAKE_HUB_TOKEN="$token" node check.mjs || status=$?
if [ -s "$work/hub.err" ]; then
  echo "--- fake_hub.py stderr:" >&2
  cat "$work/hub.err" >&2
fi
if grep -q '"violation": "' "$work/requests.jsonl"; then
  echo "run_npm_check.sh: FAIL: the request log records violations" >&2
  status=1
fi
exit $status
