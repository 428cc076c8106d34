#!/usr/bin/env bash
# `cmake --install` of a built tree, into a scratch DESTDIR with the prefixes /usr (the .deb's)
# and /usr/local (the default): berth in bin, the units where systemd reads units of that prefix
# with ExecStart= naming the installed berth, the schema and examples, berth(1), the bash
# completion, the copyright and changelog.
set -euo pipefail
build=${1:?build dir}
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
fail=0
problem() { echo "install_check: $*" >&2; fail=1; }

check_prefix() {  # check_prefix PREFIX
  local prefix=$1 root="$dest/${1//\//_}"
  DESTDIR=$root cmake --install "$build" --prefix "$prefix" >/dev/null
  for f in bin/berth libexec/berth/engine-check/vllm_check.py \
           libexec/berth/engine-check/sglang_check.py share/berth/schema.json share/berth/examples/blackwell-8x/berth.yaml \
           share/berth/examples/single-gpu share/man/man1/berth.1.gz \
           share/bash-completion/completions/berth share/doc/berth/copyright \
           share/doc/berth/changelog.gz; do
    [[ -e $root$prefix/$f ]] || problem "--prefix $prefix: $prefix/$f was not installed"
  done
  [[ -x $root$prefix/bin/berth ]] || problem "--prefix $prefix: $prefix/bin/berth is not executable"
  local units
  case $prefix in
    /usr)  # the distribution's unit directory: /lib/systemd/system on Debian 12
      units=$root/usr/lib/systemd/system
      [[ -d $root/lib/systemd/system ]] && units=$root/lib/systemd/system ;;
    *) units=$root$prefix/lib/systemd/system ;;
  esac
  for u in berth.service berth-reconcile.service berth-reconcile.timer; do
    [[ -f $units/$u ]] || { problem "--prefix $prefix: $u is not in ${units#"$root"}"; continue; }
    if grep -q '^ExecStart=' "$units/$u" && ! grep -q "^ExecStart=$prefix/bin/berth " "$units/$u"; then
      problem "--prefix $prefix: $u runs $(grep '^ExecStart=' "$units/$u"), not $prefix/bin/berth"
    fi
  done
  gzip -dc "$root$prefix/share/man/man1/berth.1.gz" | grep -q '^\.SS "berth plan"' ||
    problem "--prefix $prefix: berth.1.gz has no section for berth plan"
  ((fail)) || echo "--prefix $prefix: $(cd "$root" && find . -type f | wc -l) files, units in ${units#"$root"}"
}
check_prefix /usr
check_prefix /usr/local
exit $fail
