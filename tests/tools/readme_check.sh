#!/usr/bin/env bash
# README.md opens with exactly two commands, and .ci/run runs the second one.
set -euo pipefail
cd "${1:?source dir}"
mapfile -t cmds < <(awk '/^```/{inside=!inside; next} inside && /^[^#]/{print}' README.md | head -2)
[[ ${#cmds[@]} -eq 2 ]] || { echo "README.md: expected two commands in its first code blocks" >&2; exit 1; }
grep -qF -- "${cmds[1]}" .ci/run || { echo ".ci/run does not run README's second command: ${cmds[1]}" >&2; exit 1; }
echo "README first command: ${cmds[0]}"
echo "README second command (also .ci/run): ${cmds[1]}"
