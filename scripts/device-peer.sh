#!/usr/bin/env bash
# A peer engine measured beside Strata on the device (docs/experts.md, "Measuring a peer"): builds llama.cpp or
# ik_llama.cpp from a source tree carried in the call into build-peer (CUDA for STRATA_CUDA_ARCHS, default 90; only
# llama-bench), then runs its llama-bench once per configuration given as an argument (its flags, quoted) on MODEL.
#   git -C SNAPSHOT archive HEAD -- . ':!models' ':!tests' | tar -x -C .variants/peer/ik_llama.cpp   (here; carry it)
#   scripts/device-peer.sh .variants/peer/ik_llama.cpp MODEL "-ngl 99 --n-cpu-moe 36 -fa 1 -fmoe 1"
# PEER_BUILD_ONLY=1 builds and stops (e.g. under `nice` beside Strata's build, never beside a measurement: it takes
# every core; a call's background jobs end with the call); PEER_BUILD_DEADLINE_S
# stops the build after so many seconds with status 0 (a warm machine keeps build-peer: the next call goes on).
# PROMPT (default 512), DECODE (64), REPS (2), THREADS (all cores); lines go to stdout and $OUT/peer.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
source=${1:?usage: $0 PEER_SOURCE [MODEL [LLAMA-BENCH FLAGS...]]}
shift
build=$PWD/build-peer
results=${OUT:-$build/results}
mkdir -p "$build" "$results"

if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$source" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DGGML_NATIVE=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${STRATA_CUDA_ARCHS:-90}" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_CURL=OFF >"$build/configure.log" 2>&1 || { tail -n 20 "$build/configure.log"; exit 1; }
fi
start=$(date +%s)
if ! timeout "${PEER_BUILD_DEADLINE_S:-100000}" ninja -C "$build" -j "$(nproc)" llama-bench >"$build/build.log" 2>&1; then
  if [ "$(($(date +%s) - start))" -ge "${PEER_BUILD_DEADLINE_S:-100000}" ]; then
    echo "peer build stopped at its deadline after $(($(date +%s) - start)) s: $(tail -n 1 "$build/build.log")"
    exit 0
  fi
  tail -n 30 "$build/build.log"
  exit 1
fi
echo "peer built in $(($(date +%s) - start)) s: $(git -C "$source" log -1 --format=%h 2>/dev/null || basename "$source")"
[ "${PEER_BUILD_ONLY:-0}" = 1 ] && exit 0

model=${1:?no MODEL given}
shift
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$results/peer.txt"
status=0
for flags in "$@"; do
  echo "== llama-bench $flags" | tee -a "$results/peer.txt"
  # shellcheck disable=SC2086 # a configuration is several flags
  "$build/bin/llama-bench" -m "$model" -p "${PROMPT:-512}" -n "${DECODE:-64}" -r "${REPS:-2}" \
    -t "${THREADS:-$(nproc)}" $flags 2>"$build/bench-stderr.log" | tee -a "$results/peer.txt" ||
    { tail -n 5 "$build/bench-stderr.log" | tee -a "$results/peer.txt"; status=1; }
done
exit $status
