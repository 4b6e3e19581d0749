#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and fuzzes each parser for a bounded time:
# the GGUF reader (half of the time), the Jinja chat-template engine (a third) and the manifest (the rest).
# Usage: scripts/fuzz.sh [seconds=60]. Crashes are written to fuzz-out/ and make the script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_BUILD_FUZZERS=ON -DSTRATA_BUILD_TESTS=OFF -DSTRATA_CUDA=OFF >/dev/null
ninja -C build-fuzz gguf_fuzzer manifest_fuzzer template_fuzzer

# Undefined behaviour stops a run like a crash does.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# fuzz TARGET SECONDS MAX_LEN: a working corpus seeded from the committed one, which stays untouched.
fuzz() {
  mkdir -p "fuzz-out/$1-corpus"
  "build-fuzz/bin/$1_fuzzer" -max_total_time="$2" -rss_limit_mb=2048 -timeout=5 -max_len="$3" \
    -artifact_prefix="fuzz-out/$1-" "fuzz-out/$1-corpus" "tests/fuzz/$1-corpus"
}
fuzz gguf $((seconds / 2)) 65536
fuzz template $((seconds / 3)) 4096
fuzz manifest $((seconds - seconds / 2 - seconds / 3)) 4096
