#!/usr/bin/env bash
# Hybrid expert placement on a GPU machine (docs/experts.md), in one call: configure with CUDA and build, run the
# expert-cache tests (the CUDA backend's named functions, the placement on the CPU stand-in, the CLI), make the
# qwen3-30b-a3b IQ3_S model, check its hybrid logits against the CPU's with a quarter of the file in VRAM
# (BackendCudaLargeModel), then `strata bench` once per placement given as an argument (its flags, quoted), with
# PROMPT (default 512) and DECODE (default 64) tokens, REPS (default 1) timed runs and THREADS (default: all cores).
#   scripts/device-experts.sh "--expert-cache off" "--expert-cache 1536 --stats"
# Environment as scripts/device-test.sh (STRATA_DEVICE_BUILD, OUT); $OUT receives tests.log and bench.txt.
# BASE=DIR: the source of an earlier commit (`git archive C -- . ':!tests/reference' | tar -x -C .variants/base`,
# .variants in the call's carry), built without tests into build-base; each placement then runs with it first and
# with this tree second (lines marked "base" and "this"), on the same model in the same minutes.
# SKEW=S: the model is synthesized with --routing-skew S instead (a file of its own), `strata profile` counts its
# routing over PROFILE_PROMPTS (default: the first 24 lines of docs/experts.md, 32 tokens decoded after each; the
# tokenizer needs PCRE2: run scripts/device-deps.sh here and carry ".deps") into $OUT/profile-skew-S.json, and the word
# PROFILE in a placement stands for that file:
#   SKEW=1.0 scripts/device-experts.sh "--expert-cache 1536 --pcie-frac 0.8 --expert-profile PROFILE --stats"
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/device-common.sh

build=${STRATA_DEVICE_BUILD:-build-device}
results=${OUT:-$build/results}
logs=$PWD/$build/logs
mkdir -p "$results" "$logs"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$results/bench.txt"
configure_and_build "$build" "$PWD/tests/reference" "$logs" || exit 1
if [ -n "${BASE:-}" ]; then
  base_build=$PWD/build-base
  (cd "$BASE" && cmake -S . -B "$base_build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=ON \
    -DSTRATA_CUDA_ARCHS="${STRATA_CUDA_ARCHS:-90}" -DSTRATA_BUILD_TESTS=OFF -DSTRATA_WERROR=OFF >"$logs/base-configure.log" 2>&1 &&
    build_tree "$base_build" "$logs/base-build.log") || { tail -n 20 "$logs/base-build.log"; exit 1; }
fi

status=0
"$build/bin/strata_tests" --gtest_filter="${TESTS:-*ExpertCache*:*MoeFfnPairsOfWeightZero*:*ExpertWrite*:*WeightWrite*:*MemoryBudget*:*MemoryInfo*:*HybridExperts*:*ExpertsCli*:*LowLocked*:*CpuPollTime*}" \
  >"$results/tests.log" 2>&1 || status=1
grep -E '^\[  (FAILED|PASSED|SKIPPED) |^\[==========\]' "$results/tests.log" || true

model=$build/qwen3-30b-a3b-iq3_s.gguf
synth_flags=()
if [ -n "${SKEW:-}" ]; then
  model=$build/qwen3-30b-a3b-iq3_s-skew-$SKEW.gguf
  synth_flags=(--routing-skew "$SKEW")
fi
start=$(date +%s)
synth_bench_model "$build" "$model" "$logs/synth.log" "${synth_flags[@]}" || { tail -n 5 "$logs/synth.log"; exit 1; }
echo "model ready after $(($(date +%s) - start)) s"
profile=
if [ -n "${SKEW:-}" ]; then
  profile=$results/profile-skew-$SKEW.json
  prompts=${PROFILE_PROMPTS:-$build/profile-prompts.txt}
  [ -n "${PROFILE_PROMPTS:-}" ] || awk 'NF && ++n <= 24' docs/experts.md >"$prompts"
  start=$(date +%s)
  "$build/bin/strata" profile --model "$model" --backend cuda --prompts "$prompts" \
    --decode 32 -o "$profile" >"$logs/profile.log" 2>&1 || { tail -n 5 "$logs/profile.log"; exit 1; }
  echo "profile written after $(($(date +%s) - start)) s: $(tail -n 1 "$logs/profile.log")"
fi
if [ "${LARGE_TESTS:-1}" = 1 ]; then
  STRATA_TEST_LARGE_MODEL=$model "$build/bin/strata_tests" --gtest_filter='BackendCudaLargeModel.Hybrid*' \
    >>"$results/tests.log" 2>&1 || status=1
  grep -E '^\[  (FAILED|PASSED) |mean KL|expert cache|experts:|Failure' "$results/tests.log" | tail -n 12 || true
fi

# bench BUILD LABEL PLACEMENT: one strata bench run, its lines marked with LABEL (which the word LABEL in the
# placement stands for: `--trace-experts $OUT/trace-LABEL.json` keeps both builds' timelines).
bench() {
  local placement=${3//PROFILE/$profile}
  # shellcheck disable=SC2086 # a placement is several flags
  "$1/bin/strata" bench --model "$model" --backend cuda -t "${THREADS:-$(nproc)}" -p "${PROMPT:-512}" \
    -n "${DECODE:-64}" -r "${REPS:-1}" ${placement//LABEL/$2} 2>&1 | grep -v '^\[.*\] \[info\] backend' | sed "s/^/$2 /" |
    tee -a "$results/bench.txt"
}
for placement in "$@"; do
  echo "== strata bench $placement" | tee -a "$results/bench.txt"
  if [ -n "${BASE:-}" ]; then bench "$base_build" base "$placement" || status=1; fi
  bench "$build" this "$placement" || status=1
done
exit $status
