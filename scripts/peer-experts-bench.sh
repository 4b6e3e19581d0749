#!/usr/bin/env bash
# peer-experts-bench.sh MODEL [OUT_FILE]
#
# Peer baseline for Strata's expert offload: llama.cpp's llama-bench on the
# same GGUF (qwen3-30b-a3b IQ3_S from `strata synth`, ~12.4 GiB, 48 layers,
# 128 experts, 8 used), on one H100/H200 with 16 CPU threads.
#
# What it measures (llama-bench markdown table: pp512 and tg64 tokens/s,
# 2 repetitions each):
#   (a) experts of layers 0..35 on the CPU (--n-cpu-moe 36), everything else
#       (attention, norms, router, the experts of layers 36..47, KV cache) on
#       the GPU. 36 of 48 layers keep their experts on the CPU, so 12/48 = 25%
#       of the expert bytes are on the GPU (given every layer's experts have
#       the same shapes and quant type, as in the synthesized IQ3_S model) -- the same 25% expert budget Strata is run with.
#       --n-cpu-moe N is llama.cpp's shorthand for the override
#       -ot 'blk\.(0|1|...|35)\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU'.
#   (b) everything on the GPU (-ngl 99): sanity baseline / upper bound.
#   (c) (a) again with -fa 1, only to show that flash attention's default
#       (auto; llama-bench hides the log line that says how it resolved)
#       is "on" here; skipped if less than PEER_FA_MIN_S seconds are left.
# Everything else is llama.cpp's default as its users have it (mmap, n_batch
# 2048, n_ubatch 512, f16 KV cache, CUDA graphs on, op offload of big batches
# to the GPU on: for pp512 the CPU-resident experts are copied to the GPU per
# ubatch, which is llama.cpp's stock behaviour).
#
# llama.cpp: upstream ggml-org/llama.cpp master commit
#   34af94cd9ab277632e27caeec2d41de2fd091b31 (2026-08-17, "ci : push release
#   tag explicitly in release.yml (#27261)"), build number 10470; the source
#   is expected, trimmed to what llama-bench's CUDA build needs, in
#   .peer/llama.cpp (ignored by git, carried to the device machine;
#   .peer/llama.cpp/COMMIT holds the id).
#
# Build: CUDA for sm_90 only (90-real, what "native" gives on H100/H200),
# GGML_NATIVE=ON (-march=native on the bench host), Release, only the
# llama-bench target, ninja with all cores. Defaults that matter for speed are
# kept (FA kernels compiled, GGML_CUDA_FA_ALL_QUANTS=OFF as upstream, CUDA
# graphs ON, OpenMP ON). Build time is printed; the benches run under a
# deadline (PEER_DEADLINE_S seconds after the script starts, default 560) so
# the whole thing ends inside a 10-minute command.
#
# Output: llama-bench's markdown tables on stdout and in OUT_FILE
# (default .peer/peer-experts-bench.txt); full logs in OUT_FILE.log.
# Env: PEER_BUILD_DIR (default .peer/llama.cpp/build), PEER_CUDA_ARCH
# (default 90-real), PEER_THREADS (16), PEER_DEADLINE_S (560),
# PEER_FA_MIN_S (90), PEER_JOBS (nproc).
set -euo pipefail

T0=$(date +%s)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/.peer/llama.cpp"

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 MODEL.gguf [OUT_FILE]" >&2
    exit 2
fi
MODEL="$(realpath "$1")"
OUT="${2:-$ROOT/.peer/peer-experts-bench.txt}"
mkdir -p "$(dirname "$OUT")"
OUT="$(realpath "$OUT")"
LOG="$OUT.log"
: >"$OUT"
: >"$LOG"

BUILD="${PEER_BUILD_DIR:-$SRC/build}"
ARCH="${PEER_CUDA_ARCH:-90-real}"
THREADS="${PEER_THREADS:-16}"
DEADLINE=$((T0 + ${PEER_DEADLINE_S:-560}))
FA_MIN_S="${PEER_FA_MIN_S:-90}"
JOBS="${PEER_JOBS:-$(nproc)}"
N_CPU_MOE=36

say() { echo "$*" | tee -a "$OUT"; }
die() { say "error: $*"; exit 1; }

[[ -f "$MODEL" ]] || die "model not found: $MODEL"
[[ -f "$SRC/CMakeLists.txt" ]] || die "no llama.cpp source in $SRC (carry .peer/llama.cpp)"
COMMIT="$(cat "$SRC/COMMIT" 2>/dev/null || echo unknown)"

if ! command -v nvcc >/dev/null 2>&1; then
    export PATH="/usr/local/cuda/bin:$PATH"
fi
command -v nvcc >/dev/null 2>&1 || die "nvcc not found"
GEN="Ninja"
command -v ninja >/dev/null 2>&1 || GEN="Unix Makefiles"

say "# peer-experts-bench: llama.cpp $COMMIT"
say "# model: $MODEL ($(du -h "$MODEL" | cut -f1))"
say "# host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
if command -v nvidia-smi >/dev/null 2>&1; then
    say "# gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)"
fi
say "# nvcc: $(nvcc --version | grep -o 'release [0-9.]*'), cmake: $(cmake --version | head -1 | awk '{print $3}'), gcc: $(gcc -dumpfullversion)"

# ---- build -----------------------------------------------------------------
# Keep git from walking up into the Strata repo for llama.cpp's build info.
GIT_CEILING_DIRECTORIES="$(dirname "$SRC")"
export GIT_CEILING_DIRECTORIES
TB0=$(date +%s)
BIN="$BUILD/bin/llama-bench"
{
    cmake -S "$SRC" -B "$BUILD" -G "$GEN" \
        -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_COMPILER="$(command -v nvcc)" \
        -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
        -DGGML_CUDA=ON \
        -DGGML_NATIVE=ON \
        -DGGML_CUDA_FA_ALL_QUANTS=OFF \
        -DGGML_CCACHE=OFF \
        -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
        -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
        -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_COMMIT="${COMMIT:0:8}" -DLLAMA_BUILD_NUMBER=10470
    cmake --build "$BUILD" --target llama-bench -j "$JOBS"
} >>"$LOG" 2>&1 || { tail -n 60 "$LOG"; die "llama.cpp build failed (log: $LOG)"; }
TB1=$(date +%s)
say "# build: $((TB1 - TB0)) s with $JOBS jobs, $GEN (CUDA arch $ARCH)"
[[ -x "$BIN" ]] || die "llama-bench not built at $BIN"

# ---- benches ---------------------------------------------------------------
# run NAME ARGS...: one llama-bench invocation, cut off at the deadline.
FAILED=()
run() {
    local name="$1"; shift
    local left=$((DEADLINE - $(date +%s)))
    if (( left < 20 )); then
        say "# $name: skipped, ${left}s left before the deadline"
        return 0
    fi
    say ""
    say "## $name: llama-bench $*"
    local t0 rc=0 tmp
    t0=$(date +%s)
    tmp="$(mktemp)"
    timeout --signal=TERM --kill-after=5 "$left" \
        "$BIN" -m "$MODEL" "$@" -o md 2>>"$LOG" >"$tmp" || rc=$?
    grep '^|' "$tmp" | tee -a "$OUT" || true
    rm -f "$tmp"
    if (( rc != 0 )); then
        say "# $name: llama-bench exit $rc$([[ $rc == 124 ]] && echo ' (deadline)')"
        tail -n 5 "$LOG" | tee -a "$OUT" || true
        FAILED+=("${name%%:*}")
    fi
    say "# $name: $(( $(date +%s) - t0 )) s"
}

COMMON=(-t "$THREADS" -p 512 -n 64 -r 2)
run "a: experts of layers 0-35 on CPU (25% of expert bytes on GPU)" \
    -ngl 99 --n-cpu-moe "$N_CPU_MOE" "${COMMON[@]}"
run "b: all on GPU" \
    -ngl 99 "${COMMON[@]}"
if (( DEADLINE - $(date +%s) >= FA_MIN_S )); then
    run "c: as (a) with -fa 1" \
        -ngl 99 --n-cpu-moe "$N_CPU_MOE" -fa 1 "${COMMON[@]}"
else
    say "# c: skipped (less than ${FA_MIN_S}s left)"
fi

say ""
say "# note: (a)/(b) use llama.cpp's default -fa auto (no fa column in their tables);"
say "#       (c) forces -fa 1: equal numbers for (a) and (c) mean auto resolved to on."
say "# total: $(( $(date +%s) - T0 )) s; tables in $OUT, logs in $LOG"
if (( ${#FAILED[@]} )); then
    say "# failed runs: ${FAILED[*]}"
    exit 1
fi
