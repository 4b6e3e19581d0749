#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and fuzzes the GGUF parser for a bounded time.
# Usage: scripts/fuzz.sh [seconds=60]. Crashes are written to fuzz-out/ and make the script fail.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_BUILD_FUZZERS=ON -DSTRATA_BUILD_TESTS=OFF -DSTRATA_CUDA=OFF >/dev/null
ninja -C build-fuzz gguf_fuzzer
mkdir -p fuzz-out/corpus
# A working corpus seeded from the committed one; the committed seeds stay untouched.
build-fuzz/bin/gguf_fuzzer -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=5 -max_len=65536 \
  -artifact_prefix=fuzz-out/ fuzz-out/corpus tests/fuzz/corpus
