#!/usr/bin/env bash
# Every C++ file of the project is formatted as .clang-format says.
set -euo pipefail
cd "${1:?source dir}"
if ! command -v clang-format >/dev/null; then
  echo "clang-format not found: run .ci/setup --tests" >&2
  exit 1
fi
files=$(git ls-files '*.cc' '*.h' 2>/dev/null || find engine manifests planners providers tests -name '*.cc' -o -name '*.h')
[[ -n $files ]] || { echo "no C++ files found" >&2; exit 1; }
bad=0
for f in $files; do
  [[ -f $f ]] || continue
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (run: clang-format -i $f)"
    bad=1
  fi
done
exit $bad
