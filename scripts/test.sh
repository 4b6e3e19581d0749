#!/usr/bin/env bash
# The whole test suite: build, fuzz the parsers for a bounded time, then every GoogleTest suite via ctest.
# STRATA_FUZZ_SECONDS (default 60; 0 skips fuzzing) bounds the fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
# CI (2 cores, no GPU) compiles the CUDA plugin, when nvcc is there, for one architecture only.
if [ "${CI:-}" = true ]; then export STRATA_CUDA_ARCHS=${STRATA_CUDA_ARCHS:-75}; fi
scripts/build.sh
fuzz_seconds=${STRATA_FUZZ_SECONDS:-60}
if [ "$fuzz_seconds" -gt 0 ]; then
  mkdir -p build
  if ! scripts/fuzz.sh "$fuzz_seconds" >build/fuzz.log 2>&1; then
    tail -n 40 build/fuzz.log
    echo "fuzzing failed (full log: build/fuzz.log)"
    exit 1
  fi
  tail -n 2 build/fuzz.log
fi
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
