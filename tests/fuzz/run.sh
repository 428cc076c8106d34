#!/bin/sh
# manifests_fuzz_smoke / hub_fuzz_smoke: builds a fuzzer with clang++ (tests/fuzz/standalone) and
# runs it for a while: manifests_fuzzer (default, about 20 s) seeded with the example manifests
# and the invalid fixtures, hub_fuzzer (the Hub's answers) seeded with tests/fuzz/hub_corpus, or
# gguf_fuzzer (GGUF model files) seeded with tests/fuzz/gguf_corpus.
# Fails on any crash, sanitizer report or broken invariant; skips (exit 0) when clang++ is not
# installed.
# usage: run.sh SOURCE_DIR BUILD_DIR [SECONDS] [manifests_fuzzer|hub_fuzzer|gguf_fuzzer]
set -eu
src=$(cd "$1" && pwd)
build=$2
seconds=${3:-20}
target=${4:-manifests_fuzzer}

if ! command -v clang++ >/dev/null 2>&1; then
  echo "SKIPPED: clang++ not found (install clang to run $target)"
  exit 0
fi

mkdir -p "$build"
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
printf '%s\n' '#include <cstddef>' '#include <cstdint>' \
  'extern "C" int LLVMFuzzerTestOneInput(const uint8_t*, size_t) { return 0; }' >"$probe_dir/p.cc"
if ! clang++ -fsanitize=fuzzer,address "$probe_dir/p.cc" -o "$probe_dir/p" >/dev/null 2>&1; then
  echo "SKIPPED: clang++ cannot link libFuzzer targets (install clang's compiler-rt runtime)"
  exit 0
fi

generator=""
if command -v ninja >/dev/null 2>&1; then generator="-G Ninja"; fi
# shellcheck disable=SC2086
cmake -S "$src/tests/fuzz/standalone" -B "$build" $generator \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" --target "$target" -j 2

corpus="$build/corpus-$target"
artifacts="$build/artifacts-$target"
mkdir -p "$corpus" "$artifacts"
case $target in
  hub_fuzzer)
    dict="$src/tests/fuzz/hub.dict"
    cp "$src"/tests/fuzz/hub_corpus/* "$corpus/"
    ;;
  gguf_fuzzer)
    dict="$src/tests/fuzz/gguf.dict"
    cp "$src"/tests/fuzz/gguf_corpus/* "$corpus/"
    ;;
  *)
    dict="$src/tests/fuzz/manifest.dict"
    for f in "$src"/manifests/examples/*/*.yaml "$src"/tests/manifests/invalid/*.yaml; do
      [ -f "$f" ] && cp "$f" "$corpus/$(basename "$(dirname "$f")")-$(basename "$f")"
    done
    ;;
esac

ASAN_OPTIONS=detect_container_overflow=0:abort_on_error=0 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "$build/$target" -max_total_time="$seconds" -timeout=10 -max_len=8192 \
    -dict="$dict" -artifact_prefix="$artifacts/" -print_final_stats=1 "$corpus"
echo "ran $target for ${seconds}s without a crash"
