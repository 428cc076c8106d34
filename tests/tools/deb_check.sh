#!/usr/bin/env bash
# Checks a berth .deb (CI: .ci/package): its contents list has every path berth installs, its
# Depends come from dpkg-shlibdeps, its units run /usr/bin/berth, and lintian reports no error
# (warnings and notes are printed, and do not fail).
set -euo pipefail
deb=${1:?berth .deb}
fail=0
problem() { echo "deb_check: $*" >&2; fail=1; }

echo "== dpkg-deb -I $deb"
dpkg-deb -I "$deb"
echo "== dpkg-deb -c $deb"
listing=$(dpkg-deb -c "$deb")
echo "$listing"
paths=$(awk '{print $6}' <<<"$listing")
for p in ./usr/bin/berth ./usr/libexec/berth/engine-check/vllm_check.py \
         ./usr/libexec/berth/engine-check/sglang_check.py ./usr/share/berth/schema.json ./usr/share/berth/examples/blackwell-8x/berth.yaml \
         ./usr/share/man/man1/berth.1.gz ./usr/share/bash-completion/completions/berth \
         ./usr/share/doc/berth/copyright ./usr/share/doc/berth/changelog.gz; do
  grep -qx -- "$p" <<<"$paths" || problem "$deb lacks $p"
done
for u in berth.service berth-reconcile.service berth-reconcile.timer; do
  grep -qE "^\./(usr/)?lib/systemd/system/$u$" <<<"$paths" || problem "$deb lacks lib/systemd/system/$u"
done
grep -v '^d' <<<"$listing" | awk '$2 != "root/root" {print}' | grep -q . && problem "files not owned by root/root"

maintainer=$(dpkg-deb -f "$deb" Maintainer)
[[ $maintainer == "berth developers <berth-dev@lists.berth.dev>" ]] || problem "Maintainer is '$maintainer'"

depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for lib in libc6 libstdc++6 libyaml-cpp libcurl libsystemd0 libspdlog libfmt; do
  grep -q "$lib" <<<"$depends" || problem "Depends lacks $lib (is dpkg-shlibdeps installed?): $depends"
done

recommends=$(dpkg-deb -f "$deb" Recommends)
grep -qw haproxy <<<"$recommends" || problem "Recommends lacks haproxy (the front): $recommends"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dpkg-deb -x "$deb" "$work"
unit=$(find "$work" -name berth.service | head -1)
copyright=$work/usr/share/doc/berth/copyright
grep -qx 'License: Apache-2.0' "$copyright" || problem "its copyright file does not say License: Apache-2.0"
grep -q '/usr/share/common-licenses/Apache-2.0' "$copyright" || problem "its copyright file does not point at /usr/share/common-licenses/Apache-2.0"
grep -q '^ExecStart=/usr/bin/berth reconcile ' "$unit" || problem "berth.service does not run /usr/bin/berth: $(grep ExecStart= "$unit")"

echo "== lintian $deb"
report=$(lintian --display-info "$deb" 2>&1) || true
echo "${report:-(nothing to report)}"
if grep -q '^E: ' <<<"$report"; then
  problem "lintian reports errors (E:) on $deb"
fi
((fail == 0)) && echo "deb_check: $deb is complete and lintian reports no error"
exit $fail
