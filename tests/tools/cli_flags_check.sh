#!/usr/bin/env bash
# Global flags work before and after the subcommand, as the README shows them; an unknown flag
# is still refused.
set -euo pipefail
berth=${1:?berth binary}; src=${2:?source dir}
m="$src/manifests/examples/single-gpu"
"$berth" --log-level debug validate -f "$m" >/dev/null
"$berth" validate -f "$m" --log-level debug >/dev/null
"$berth" validate --log-level=info -f "$m" >/dev/null
if "$berth" validate -f "$m" --no-such-flag 2>/dev/null; then
  echo "an unknown flag after the subcommand was accepted" >&2; exit 1
fi
echo "global flags accepted before and after the subcommand; unknown flags refused"
