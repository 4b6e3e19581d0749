#!/usr/bin/env bash
# A/B on a GPU machine in one call: builds the checkout (as scripts/device-test.sh, build-device), synthesizes
# the qwen3-30b-a3b IQ3_S model once, then measures the tree as it is and with each patch applied alone
# (patches made with `git diff main my-branch > .variants/name.patch` in an ignored folder named in the
# call's carry): tg128 twice, and a traced 16-token decode (scripts/kernel-trace.cpp) summed by
# scripts/kernel-trace.py. Each patch is reverted before the next; a patch touching an SDK header rebuilds
# every plugin twice (applied, then reverted): ~1.5 min each on 16 cores, so keep such variants few.
#   --prompt      also pp512 for each
#   --depth       also tg128 after 4096 and 16384 cached tokens (-d 4096 16384: the split decode attention)
#   --source      also where the base tree's decode kernels stall per instruction (source_profile in
#                 scripts/device-common.sh: $OUT/ncu-decode-source.csv.gz, $OUT/ncu-source-sections.txt)
#   --stack       applies the patches one on top of the other, reverted only at the end (each measured with those
#                 before it: for a branch's commits, `git diff a b` each), which saves the rebuilds of reverts
#   --ncu REGEX   also ncu's speed-of-light, warp-state (stall), memory-table, occupancy and instruction sections
#                 of two decode launches of the kernels matching REGEX (e.g. expert), per build: $OUT/ncu-<name>.txt
#   --ops LIST    also times these ops alone (strata bench --ops LIST, e.g. moe_ffn,attn_output) per build and in
#                 each round: an op's own time, with less spread than tg128
#   --rounds N    then N rounds of one tg128 run each of the base and of every variant in turn, from copies of
#                 their binaries and plugins: within one call the same binary measured 432-443 t/s, and the first
#                 runs after a fresh machine's build read up to 2% slow, so a base measured once, first, can
#                 make a variant look better or worse than it is
#   TESTS=filter  also runs strata_tests --gtest_filter=filter for the base and each patch (the CUDA suite: ~90 s)
#   NO_TRACE=1    leaves the traced decode out (saves ~15 s a variant)
#   ENVS='A=1;A=2' also measures the base binary under each environment setting (';' between them), as a
#                 variant of its own with no rebuild (for a knob that picks a kernel at run time, e.g. one a
#                 measurement patch adds)
#   FLAGS='--a;--b' also measures the base binary with each of these strata bench arguments (';' between sets),
#                 as a variant of its own with no rebuild (a path a flag turns off, e.g. --no-normed-inputs)
#   GREP='a;b'    also keeps the last 6 lines matching each pattern (extended regex, ';' between them) of a
#                 320-token decode: what a measurement patch (clock64 stamps of a kernel's phases, printed by the
#                 kernel) prints, the patch applied by the call's command before this script and reverted after
#                 it, so that the base has it too
# Per variant: $OUT/<name>.txt (bench lines, the trace summary, the tests' verdict; a call brings back 8 files
# at most) with its trace in /tmp/variants/<name>.csv; a table of them last. Each command runs under a
# timeout (the first build and the synth excepted), so a hung variant costs its own minutes only: a call
# should still leave a minute per variant.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/device-common.sh
prompt=0 depth=0 stack=0 source=0 rounds=0 ncu_kernels= ops=
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --prompt) prompt=1 ;;
    --depth) depth=1 ;;
    --stack) stack=1 ;;
    --source) source=1 ;;
    --rounds) rounds=$2; shift ;;
    --ncu) ncu_kernels=$2; shift ;;
    --ops) ops=$2; shift ;;
    *) echo "usage: $0 [--prompt] [--depth] [--stack] [--source] [--ncu REGEX] [--ops LIST] [--rounds N] patch..." >&2; exit 2 ;;
  esac
  shift
done
build=${STRATA_DEVICE_BUILD:-build-device}
out=${OUT:-$build/variants}
model=/tmp/strata-qwen3-30b-a3b-iq3_s.gguf
traces=/tmp/variants
mkdir -p "$out" "$traces"
rm -rf "$traces"/bin-*  # a warm machine's copies from an earlier call
mkdir -p /tmp/variants-logs
configure_and_build "$build" "$PWD/tests/reference" /tmp/variants-logs || exit 1
build_kernel_tracer "$build"
synth_bench_model "$build" "$model" /tmp/variants-logs/synth.log

# measure NAME [VAR=VALUE...]: the measurements of the tree as built, under those environment settings (and
# with the bench arguments in $flags, unquoted: split at spaces).
flags=
# lines_of PATTERN SECONDS COMMAND...: COMMAND's output lines matching PATTERN (with its error lines), or a line
# saying it gave none and how it ended (124: timed out), so a variant that fails says so.
lines_of() {
  local pattern=$1 seconds=$2 output status
  output=$(timeout "$seconds" "${@:3}" 2>&1)
  status=$?
  grep -E -- "$pattern|error" <<<"$output" || echo "no $pattern line: exit $status, ending: $(tail -c 300 <<<"$output")"
}
measure() {
  local name=$1 bench=(env "${@:2}" "$build/bin/strata" bench --model "$model" --backend cuda $flags)
  {
    [ "$prompt" = 1 ] && lines_of pp512 60 "${bench[@]}" -n 0
    for _ in 1 2; do lines_of tg128 30 "${bench[@]}" -p 0; done
    [ -n "$ops" ] && timeout 60 "${bench[@]}" --ops "$ops" --op-calls 480 -r 5 2>&1 | grep ' us '
    [ "$depth" = 1 ] && timeout 90 "${bench[@]}" -p 0 -d 4096 16384 2>&1 | grep tg128
    if [ -n "${GREP:-}" ]; then
      timeout 30 "${bench[@]}" -p 0 -n 320 -r 1 >/tmp/variants-grep.txt 2>&1
      IFS=';' read -ra patterns <<<"$GREP"
      for pattern in "${patterns[@]}"; do grep -E -- "$pattern" /tmp/variants-grep.txt | tail -n 6; done
    fi
    if [ -z "${NO_TRACE:-}" ]; then
      traced "$build" "$traces/$name.csv" timeout 30 "${bench[@]}" -p 0 -n 16 -r 1 2>&1 | grep tg16
      python3 scripts/kernel-trace.py "$traces/$name.csv"
    fi
  } >"$out/$name.txt" 2>&1
  # Launches well into the decode (-n 8 without graphs: ~500 kernels a step), one at a time as ncu runs them.
  if [ -n "$ncu_kernels" ]; then
    timeout 150 ncu --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis_Tables \
      --section Occupancy --section InstructionStats -k "regex:$ncu_kernels" --launch-skip 400 --launch-count 2 \
      "${bench[@]}" --no-graphs -p 0 -n 8 -r 1 >"$out/ncu-$name.txt" 2>&1
  fi
}

# A warm device machine keeps its copy of the tree between calls and re-sends only the files changed here:
# a patch left applied there would silently stay in the next call's sources (and build_tree rebuilds what a
# reverted patch touched). Stacked patches go back at exit.
applied=()
revert_applied() {
  for ((i = ${#applied[@]} - 1; i >= 0; i--)); do patch -R -p1 <"${applied[i]}" >/dev/null; done
}
trap revert_applied EXIT

# keep_binaries NAME: the strata binary, its manifest and plugins as built now, for the rounds (--rounds).
keep_binaries() {
  [ "$rounds" -gt 0 ] || return 0
  rm -rf "$traces/bin-$1" && mkdir -p "$traces/bin-$1" &&
    cp -a "$build/bin/strata" "$build/bin/strata-manifest.json" "$build/bin/plugins" "$traces/bin-$1/"
}

# run_tests NAME [VAR=VALUE...]: the TESTS filter's verdict, under those settings, into NAME's file.
run_tests() {
  [ -n "${TESTS:-}" ] || return 0
  env "${@:2}" timeout 200 "$build/bin/strata_tests" --gtest_filter="$TESTS" 2>&1 |
    grep -E '^\[  (PASSED|FAILED) ' >>"$out/$1.txt"
}

# Every variant measured, in order; the kept binary each one's rounds run (a patch's own, or the base's for
# an environment setting) and its settings.
variants=(base)
declare -A binary_of=([base]=base) settings_of=([base]=) flags_of=([base]=)
measure base
keep_binaries base
run_tests base
IFS=';' read -ra envs <<<"${ENVS:-}"
for setting in "${envs[@]}"; do
  name=$(echo "env-$setting" | tr -c 'A-Za-z0-9_.\n-' '_')
  variants+=("$name") binary_of[$name]=base settings_of[$name]=$setting flags_of[$name]=
  measure "$name" $setting
  run_tests "$name" $setting
done
IFS=';' read -ra flag_sets <<<"${FLAGS:-}"
for flags in "${flag_sets[@]}"; do
  name=$(echo "flags$flags" | tr -c 'A-Za-z0-9_.\n-' '_')
  variants+=("$name") binary_of[$name]=base settings_of[$name]= flags_of[$name]=$flags
  measure "$name"
done
flags=
[ "$source" = 1 ] && timeout 240 bash -c "source scripts/device-common.sh; source_profile '$build' '$model' '$out'"
for patch in "$@"; do
  name=$(basename "$patch" .patch)
  variants+=("$name") binary_of[$name]=$name settings_of[$name]= flags_of[$name]=
  if ! patch -p1 --dry-run <"$patch" >/dev/null; then echo "$name: does not apply" >"$out/$name.txt"; continue; fi
  patch -p1 <"$patch" >/dev/null && applied+=("$patch")
  if timeout 300 bash -c "source scripts/device-common.sh; build_tree '$build' '/tmp/variants-build-$name.log' $(nproc)"; then
    measure "$name"
    keep_binaries "$name"
    run_tests "$name"
  else
    tail -n 30 "/tmp/variants-build-$name.log" >"$out/$name.txt"
  fi
  if [ "$stack" = 0 ]; then patch -R -p1 <"$patch" >/dev/null && unset 'applied[-1]'; fi
done
for ((round = 1; round <= rounds; round++)); do
  for name in "${variants[@]}"; do
    bin=$traces/bin-${binary_of[$name]}/strata
    [ -x "$bin" ] || continue
    bench=(env ${settings_of[$name]} "$bin" bench --model "$model" --backend cuda ${flags_of[$name]})
    lines_of tg128 30 "${bench[@]}" -p 0 | sed "s/$/  (round $round)/" >>"$out/$name.txt"
    [ -n "$ops" ] && timeout 60 "${bench[@]}" --ops "$ops" --op-calls 480 -r 5 2>&1 | grep ' us ' |
      sed "s/$/  (round $round)/" >>"$out/$name.txt"
  done
done
for name in "${variants[@]}"; do
  echo "== $name"
  grep -E "pp512|tg128| us |steps of|PASSED|FAILED|does not apply|error|no .* line${GREP:+|${GREP//;/|}}" "$out/$name.txt" |
    sed 's/.*reserved f16 *//'
done
