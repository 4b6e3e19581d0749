#!/usr/bin/env bash
# Hybrid expert placement on a GPU machine (docs/experts.md), in one call: configure with CUDA and build, run the
# expert-cache tests (the CUDA backend's named functions, the placement on the CPU stand-in, the CLI), make the
# qwen3-30b-a3b IQ3_S model, check its hybrid logits against the CPU's with a quarter of the file in VRAM
# (BackendCudaLargeModel), then `strata bench` once per placement given as an argument (its flags, quoted), with
# PROMPT (default 512) and DECODE (default 64) tokens, REPS (default 1) timed runs and THREADS (default: all cores).
#   scripts/device-experts.sh "--expert-cache off" "--expert-cache 1536 --stats"
# Environment as scripts/device-test.sh (STRATA_DEVICE_BUILD, OUT); $OUT receives tests.log and bench.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/device-common.sh

build=${STRATA_DEVICE_BUILD:-build-device}
results=${OUT:-$build/results}
logs=$build/logs
mkdir -p "$results" "$logs"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$results/bench.txt"
configure_and_build "$build" "$PWD/tests/reference" "$logs" || exit 1

status=0
"$build/bin/strata_tests" --gtest_filter="${TESTS:-*ExpertCache*:*MoeFfnPairsOfWeightZero*:*ExpertWrite*:*WeightWrite*:*MemoryBudget*:*MemoryInfo*:*HybridExperts*:*ExpertsCli*}" \
  >"$results/tests.log" 2>&1 || status=1
grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]' "$results/tests.log" || true

model=$build/qwen3-30b-a3b-iq3_s.gguf
start=$(date +%s)
synth_bench_model "$build" "$model" "$logs/synth.log" || { tail -n 5 "$logs/synth.log"; exit 1; }
echo "model ready after $(($(date +%s) - start)) s"
if [ "${LARGE_TESTS:-1}" = 1 ]; then
  STRATA_TEST_LARGE_MODEL=$model "$build/bin/strata_tests" --gtest_filter='BackendCudaLargeModel.Hybrid*' \
    >>"$results/tests.log" 2>&1 || status=1
  grep -E '^\[  (FAILED|PASSED) |mean KL|expert cache|experts:|Failure' "$results/tests.log" | tail -n 12 || true
fi

for placement in "$@"; do
  echo "== strata bench $placement" | tee -a "$results/bench.txt"
  # shellcheck disable=SC2086 # a placement is several flags
  "$build/bin/strata" bench --model "$model" --backend cuda -t "${THREADS:-$(nproc)}" -p "${PROMPT:-512}" \
    -n "${DECODE:-64}" -r "${REPS:-1}" $placement 2>&1 | grep -v '^\[.*\] \[info\] backend' | tee -a "$results/bench.txt" ||
    status=1
done
exit $status
