#!/usr/bin/env bash
# The whole test suite: build, fuzz the parsers for a bounded time, then every GoogleTest suite via ctest;
# the last line counts the skipped tests by reason (only GPU tests may skip).
#   --sanitize   instead: the CPU build under AddressSanitizer + UBSan with _GLIBCXX_ASSERTIONS (in
#                build-sanitize/), and every GoogleTest suite on it; no fuzzing (the fuzzers are sanitized already)
# STRATA_FUZZ_SECONDS (default 60; 0 skips fuzzing) bounds the fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=0
for argument in "$@"; do
  case "$argument" in
    --sanitize) sanitize=1 ;;
    *) echo "usage: $0 [--sanitize]" >&2; exit 2 ;;
  esac
done
# CI (2 cores, no GPU) compiles the CUDA plugin, when nvcc is there, for one architecture only.
if [ "${CI:-}" = true ]; then export STRATA_CUDA_ARCHS=${STRATA_CUDA_ARCHS:-75}; fi

if [ "$sanitize" = 1 ]; then
  build=build-sanitize
  # -O1 with line tables only: less build time on CI's 2 cores than -O2 with full debug info; stacks still name lines.
  # Warnings are no errors here: with the sanitizers' instrumentation GCC 12 warns falsely (maybe-uninitialized
  # inside libstdc++'s std::regex); the plain build holds the warnings gate.
  STRATA_BUILD_DIR=$build scripts/build.sh -DSTRATA_SANITIZE=ON -DSTRATA_CUDA=OFF -DSTRATA_WERROR=OFF \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1"
  # Any report fails the test that caused it; leaks too.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
else
  build=build
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
fi

# The official OpenAI client the server's tests run (from the npm registry, once).
scripts/install-clients.sh

status=0
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" --timeout 600 || status=$?
# GoogleTest prints "FILE:LINE: Skipped" and then the reason on the next line.
awk '/: Skipped$/ { getline reason; count[reason]++; total++ }
     END { line = "skipped: " total + 0; for (reason in count) line = line "; " count[reason] " x " reason; print line }' \
  "$build/Testing/Temporary/LastTest.log"
exit "$status"
