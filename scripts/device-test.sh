#!/usr/bin/env bash
# One command for a GPU machine: configure with CUDA for one architecture, build, run the CUDA backend's
# tests (op by op against the CPU backend, and the reference models' logits with --backend cuda) and the
# CPU reference-logit tests, then optionally more:
#   --sanitize   also run every CUDA test (the op tests and the reference models' logits) under
#                compute-sanitizer --tool memcheck, and the attention tests under --tool racecheck, each in
#                STRATA_SANITIZE_SHARDS (default 6) processes side by side
#   --bench      also synthesize a qwen3-30b-a3b IQ3_S model, check that CPU and CUDA logits agree on it
#                (STRATA_TEST_LARGE_MODEL) and run strata bench --backend cuda on it, with and without graphs,
#                and decode after 4096 and 16384 cached tokens (split decode attention)
#   --profile    with --bench: kernel times of a decode step (warm caches, own clocks), ncu's
#                throughput/stall sections for a few decode kernels, and a prompt step's kernels under ncu
#                (scripts/kernel-profile.py sums them by kernel)
#   --source     with --bench (alone it does nothing): where in the code of one decode step's kernels warps
#                stall (ncu's SourceCounters with the finest PC sampling, exported per SASS instruction with its
#                stall reasons as CSV, compressed: ncu-decode-source.csv.gz; and the kernels' sections as text)
#   --ptx ARCH   build the CUDA code as PTX for compute_ARCH only (75: RTX 20xx, 86: RTX 30xx), in
#                build-device-ptxARCH: the driver compiles it for this GPU at load, with __CUDA_ARCH__ of the older
#                card, so the code paths our users' GPUs take run here (JIT cache in that build folder); for 75
#                and 86 the kernels' choices also see an RTX 2080 Ti's or an RTX 3060's multiprocessors and
#                shared memory a block (STRATA_CUDA_CAP_SMS, STRATA_CUDA_CAP_SHARED_KIB: strata/cuda/device_limits.cuh)
#   --trace      with --bench: when each kernel of 16 decode steps ran, graphs and overlapped launches as they
#                are (scripts/kernel-trace.cpp, a CUPTI injection library), summed per kernel by
#                scripts/kernel-trace.py: each kernel's share of a step's critical path
# The reference data (models, logits, tokens) is read from $STRATA_REFERENCE_DIR, default tests/reference/ (it
# travels with the checkout).
# TESTS=filter narrows the CUDA tests and the sanitizers' runs to the tests matching the gtest filter (the
# attention tests after a change to them, say; racecheck still takes the attention tests only).
# Environment: STRATA_CUDA_ARCHS (default 90), STRATA_BUILD_JOBS (default: all cores), STRATA_DEVICE_BUILD
# (the build folder, default build-device), OUT (a folder for the results, when set).
# $OUT receives at most 6 files (a device call brings back 8): tests.log (plugins, the CUDA tests, the large
# model's), sanitize.log, bench.txt (with the trace's summary), profile.txt and, with --source,
# ncu-decode-source.csv.gz and ncu-source-sections.txt; build logs and raw CSVs stay in the build folder's logs/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/device-common.sh

sanitize=0 bench=0 profile=0 trace=0 source=0 ptx=
while [ $# -gt 0 ]; do
  argument=$1
  shift
  case "$argument" in
    --ptx) ptx=${1:?--ptx needs an architecture, e.g. 75}; shift ;;
    --sanitize) sanitize=1 ;;
    --bench) bench=1 ;;
    --profile) profile=1 ;;
    --trace) trace=1 ;;
    --source) source=1 ;;
    *) echo "usage: $0 [--ptx ARCH] [--sanitize] [--bench [--profile] [--trace] [--source]]" >&2; exit 2 ;;
  esac
done

build=${STRATA_DEVICE_BUILD:-build-device}
if [ -n "$ptx" ]; then
  export STRATA_CUDA_ARCHS=$ptx-virtual
  build=${STRATA_DEVICE_BUILD:-build-device-ptx$ptx}
  # The JIT's results, kept with the build (a warm machine then skips the compilation); the default 256 MiB
  # cache holds too few of the kernels' instances.
  export CUDA_CACHE_PATH=$(realpath -m "$build")/jit-cache CUDA_CACHE_MAXSIZE=4294967296
  case "$ptx" in
    75) export STRATA_CUDA_CAP_SMS=68 STRATA_CUDA_CAP_SHARED_KIB=64 ;;  # RTX 2080 Ti
    86) export STRATA_CUDA_CAP_SMS=28 STRATA_CUDA_CAP_SHARED_KIB=99 ;;  # RTX 3060
  esac
fi
reference=${STRATA_REFERENCE_DIR:-$PWD/tests/reference}
results=${OUT:-$build/results}
logs=$build/logs
mkdir -p "$results" "$logs"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

configure_and_build "$build" "$reference" "$logs" || exit 1

status=0
# passed LOG: whether a gtest run's log says it passed with no failure.
passed() { grep -q '^\[  PASSED  \]' "$1" && ! grep -q '^\[  FAILED  \]' "$1"; }
"$build/bin/strata" plugins | tee "$results/tests.log"
"$build/bin/strata_tests" --gtest_filter="${TESTS:-*BackendCuda*:*ReferenceLogits*}" >"$logs/tests.log" 2>&1 || true
cat "$logs/tests.log" >>"$results/tests.log"
grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]|mean KL|Failure|error' "$logs/tests.log" || true
passed "$logs/tests.log" || status=1

if [ "$sanitize" = 1 ]; then
  # sanitized TOOL FILTER LOG: the tests matching FILTER under compute-sanitizer TOOL, split over
  # STRATA_SANITIZE_SHARDS processes side by side (gtest's sharding): the sanitizers' own work is mostly the
  # host's, so shards share the GPU well and the whole suite fits one device call. Each shard's log in turn
  # is appended to LOG; fails if any shard failed.
  sanitized() {
    local tool=$1 filter=$2 log=$3 shards=${STRATA_SANITIZE_SHARDS:-6} shard failed=0
    for ((shard = 0; shard < shards; shard++)); do
      GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$shard compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$build/bin/strata_tests" --gtest_filter="$filter" >"$logs/$tool-$shard.log" 2>&1 &
    done
    for ((shard = 0; shard < shards; shard++)); do
      wait -n || failed=1
    done
    for ((shard = 0; shard < shards; shard++)); do
      cat "$logs/$tool-$shard.log" >>"$log"
      tail -n 2 "$logs/$tool-$shard.log"
    done
    return "$failed"
  }
  : >"$results/sanitize.log"
  sanitized memcheck "${TESTS:-*BackendCuda*}" "$results/sanitize.log" || status=1
  # The attention kernels share K/V tiles and softmax state between warps through shared memory.
  sanitized racecheck '*BackendCudaAttention*' "$results/sanitize.log" || status=1
fi

if [ "$bench" = 1 ]; then
  model=/tmp/strata-qwen3-30b-a3b-iq3_s.gguf
  synth_bench_model "$build" "$model" "$logs/synth.log"
  STRATA_TEST_LARGE_MODEL="$model" "$build/bin/strata_tests" --gtest_filter='*LargeModel*' >"$logs/large-model.log" 2>&1 || true
  cat "$logs/large-model.log" >>"$results/tests.log"
  grep -E '^\[  (FAILED|PASSED|SKIPPED) |mean KL|Failure' "$logs/large-model.log" || true
  passed "$logs/large-model.log" || status=1
  bench_log=$results/bench.txt
  "$build/bin/strata" bench --model "$model" --backend cuda 2>&1 | tee "$bench_log"
  "$build/bin/strata" bench --model "$model" --backend cuda --no-graphs -p 0 2>&1 | tee -a "$bench_log"
  "$build/bin/strata" bench --model "$model" --backend cuda -p 0 -d 4096 16384 2>&1 | tee -a "$bench_log"
  if [ "$trace" = 1 ]; then
    build_kernel_tracer "$build"
    traced "$build" "$logs/trace-decode.csv" "$build/bin/strata" bench --model "$model" --backend cuda -p 0 -n 16 \
      -r 1 2>&1 | tee -a "$bench_log"
    python3 scripts/kernel-trace.py "$logs/trace-decode.csv" | tee -a "$bench_log"
  fi
  if [ "$profile" = 1 ]; then
    # Kernel times of about one decode step, op by op, with warm caches and the card's own clocks (ncu by
    # default flushes caches and locks base clocks, which suits comparisons but not a time budget).
    ncu --metrics gpu__time_duration.sum --csv --cache-control none --clock-control none --launch-skip 4000 \
      --launch-count 700 "$build/bin/strata" bench --model "$model" --backend cuda --no-graphs -p 0 -n 16 -r 1 \
      >"$logs/ncu-decode.csv" 2>/dev/null || true
    python3 scripts/kernel-profile.py "$logs/ncu-decode.csv" | tee "$results/profile.txt"
    # Why the largest decode kernels are slow: ncu's throughput, occupancy and stall sections for a few, and
    # where in their code the warps stall (SourceCounters: the instructions with the most stall samples).
    ncu --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section SourceCounters -k 'regex:matvec|expert|rms_norm|attention|route' --launch-skip 2000 \
      --launch-count 14 "$build/bin/strata" bench \
      --model "$model" --backend cuda --no-graphs -p 0 -n 8 -r 1 >>"$results/profile.txt" 2>&1 || true
    ncu --metrics gpu__time_duration.sum --csv --launch-skip 0 --launch-count 3000 "$build/bin/strata" bench \
      --model "$model" --backend cuda -p 512 -n 0 -r 1 >"$logs/ncu-prompt.csv" 2>/dev/null || true
    python3 scripts/kernel-profile.py "$logs/ncu-prompt.csv" | tee -a "$results/profile.txt"
  fi
  [ "$source" = 1 ] && source_profile "$build" "$model" "$results"
fi
exit "$status"
