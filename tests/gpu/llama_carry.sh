#!/usr/bin/env bash
# Gathers what tests/gpu/llama_gpu.sh needs on the GPU machine, which reaches no network and has no
# Debian libraries (../shared/reference/gpu-machine.md), into one folder to carry there:
#
#   tests/gpu/llama_carry.sh BERTH PAGE_CACHE_TOOL TGZ [DIR]
#
#   BERTH            berth built here (Debian 12), e.g. build-release/berth
#   PAGE_CACHE_TOOL  tests/providers/page_cache_tool built here (berth's own Prewarm and Evict)
#   TGZ              node-llama-cpp-3.21.1.tgz; its sha512 must be the one in
#                    tests/real_engine/llama_cpp.pin (the real-engine tests' source)
#   DIR              default build-gpu (ignored by git: name it in the device call's carry)
#
# DIR gets bin/ (the two programs, stripped), lib/ (their shared libraries but glibc's and
# libstdc++'s, for LD_LIBRARY_PATH) and llama-src.tar.xz: the pinned commit's tree as git clones
# it from the tarball's bundle, without the models but the vocabulary make_gguf.py reads, the
# docs, examples and tests (8 MB instead of the tarball's 35: the carry is limited to 64 MiB), and
# llama-src.commit, the commit it was archived from.
set -euo pipefail
if [[ $# -lt 3 || $# -gt 4 ]]; then
  echo "usage: $0 BERTH PAGE_CACHE_TOOL TGZ [DIR]" >&2
  exit 2
fi
berth=$1 tool=$2 tgz=$3 dir=${4:-build-gpu}
here=$(cd "$(dirname "$0")/../.." && pwd)
pin=$here/tests/real_engine/llama_cpp.pin
want_sri=$(sed -n 's/^integrity=//p' "$pin")
want_commit=$(sed -n 's/^commit=//p' "$pin")
got_sri="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [[ $got_sri != "$want_sri" ]]; then
  echo "$tgz: $got_sri is not the pinned $want_sri" >&2
  exit 1
fi

rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tar xzf "$tgz" -C "$work" package/llama/gitRelease.bundle
git -c advice.detachedHead=false clone -q "$work/package/llama/gitRelease.bundle" "$work/llama.cpp"
commit=$(git -C "$work/llama.cpp" rev-parse HEAD)
if [[ $commit != "$want_commit"* ]]; then
  echo "the bundle's commit $commit is not the pinned $want_commit" >&2
  exit 1
fi
git -C "$work/llama.cpp" archive --format=tar -o "$work/src.tar" HEAD -- . ':!models' ':!docs' \
  ':!media' ':!examples' ':!tests'
tar -rf "$work/src.tar" -C "$work/llama.cpp" models/ggml-vocab-llama-spm.gguf
xz -T2 -6 -c "$work/src.tar" >"$dir/llama-src.tar.xz"
echo "$commit" >"$dir/llama-src.commit"

for p in "$berth" "$tool"; do
  strip -o "$dir/bin/$(basename "$p")" "$p"
  ldd "$p" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|libresolv)\.so' |
  while read -r lib; do cp -L "$lib" "$dir/lib/"; done
du -sh "$dir"/* | sed 's/^/  /'
echo "carry $dir: $(du -sm "$dir" | cut -f1) MiB"
