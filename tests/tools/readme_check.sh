#!/usr/bin/env bash
# README.md opens with exactly two commands, and .ci/run runs the second one.
set -euo pipefail
cd "${1:?source dir}"
mapfile -t cmds < <(awk '/^```/{inside=!inside; next} inside && /^[^#]/{print}' README.md | head -2)
[[ ${#cmds[@]} -eq 2 ]] || { echo "README.md: expected two commands in its first code blocks" >&2; exit 1; }
grep -qF -- "${cmds[1]}" .ci/run || { echo ".ci/run does not run README's second command: ${cmds[1]}" >&2; exit 1; }
echo "README first command: ${cmds[0]}"
echo "README second command (also .ci/run): ${cmds[1]}"
# The plan README shows is the plan the first command prints (the golden file the tests check).
shown=$(sed -n '/^## What the first command prints/,/^The download comes first/p' README.md | sed -n '/^```$/,/^```$/p' | sed '1d;$d')
if [[ "$shown" != "$(cat tests/engine/golden/blackwell-8x.plan.txt)" ]]; then
  echo "README.md's sample plan differs from tests/engine/golden/blackwell-8x.plan.txt; copy it over" >&2
  exit 1
fi
echo "README sample plan matches the golden plan"
