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
# berth's store read by the client as its own cache (and a cache of the client's reused by berth).
if [ "$status" -eq 0 ]; then
  if [ -z "${BERTH_BIN:-}" ] || [ ! -x "$BERTH_BIN" ]; then
    echo "run_npm_check.sh: FAIL: BERTH_BIN (the berth binary) is not set; CTest sets it" >&2
    status=1
  else
    store="$work/berth-store"
    HF_ENDPOINT="$api" HF_TOKEN="$token" "$BERTH_BIN" pull hf://org/tiny --store "$store" >/dev/null || status=$?
    commit=$(cat "$store/models--org--tiny/refs/main")
    FAKE_HUB_API="$api" BERTH_STORE="$store" COMMIT="$commit" node interop.mjs || status=$?
    # The other way: a blob the client cached is reused by berth, not fetched again.
    FAKE_HUB_API="$api" node -e '
      const { downloadFileToCacheDir } = require("@huggingface/hub");
      console.debug = () => {};
      downloadFileToCacheDir({ repo: "org/tiny", path: "model.safetensors", hubUrl: process.env.FAKE_HUB_API,
                               cacheDir: process.argv[1] }).then(() => process.exit(0), (e) => { console.error(e); process.exit(1); });
    ' "$work/client-cache" || status=$?
    out=$(HF_ENDPOINT="$api" HF_TOKEN="$token" "$BERTH_BIN" pull hf://org/tiny --store "$work/client-cache" | tail -1)
    echo "$out"
    case "$out" in
      *"3 MB already there"*) echo "ok   berth reused the blob @huggingface/hub cached" ;;
      *) echo "FAIL berth did not reuse the client's blob: $out" >&2; status=1 ;;
    esac
  fi
fi
if [ -s "$work/hub.err" ]; then
  echo "--- fake_hub.py stderr:" >&2
  cat "$work/hub.err" >&2
fi
if grep -q '"violation": "' "$work/requests.jsonl"; then
  echo "run_npm_check.sh: FAIL: the request log records violations" >&2
  status=1
fi
exit $status
