#!/usr/bin/env bash
# The whole test suite: build, fuzz the parsers for a bounded time, then every GoogleTest suite via ctest.
# STRATA_FUZZ_SECONDS (default 60; 0 skips fuzzing) bounds the fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
fuzz_seconds=${STRATA_FUZZ_SECONDS:-60}
if [ "$fuzz_seconds" -gt 0 ]; then
  scripts/fuzz.sh "$fuzz_seconds" 2>&1 | tail -n 3
fi
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
