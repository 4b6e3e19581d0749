#!/usr/bin/env bash
# Bytes of sm_90 machine code per kernel of one CUDA source, without a GPU: compiles the source as ninja would
# for its object in BUILD (a CUDA build folder), but to a cubin for ARCH, and prints each kernel's .text size
# whose demangled name matches PATTERN (all by default), smallest first. A decode step runs each of its
# kernels once per layer, so the code it executes is fetched afresh every time: its size is a cost.
#   scripts/kernel-code-size.sh build-cuda plugins/backend-cuda/CMakeFiles/strata-backend-cuda.dir/attention.cu.o 'attention_kernel<4'
# ARCH=sm_89 picks another architecture. Needs readelf and c++filt (binutils).
set -euo pipefail
build=$1 object=$2 pattern=${3:-.}
cubin=$(mktemp --suffix=.cubin)
trap 'rm -f "$cubin"' EXIT
command=$(ninja -C "$build" -t commands "$object" | tail -n 1)
[[ "$command" == *nvcc* ]] || { echo "$object: not built by nvcc in $build" >&2; exit 2; }
# Compile to one cubin: the object's own -gencode/--generate-code options go, the output becomes the cubin.
command=$(sed -E "s/ -o [^ ]+/ -o ${cubin//\//\\/}/; s/ -c / -cubin /; s/--generate-code=arch=compute_[0-9]+,code=\[[^]]*\]//g; s/-gencode[= ][^ ]*//g" <<<"$command")
(cd "$build" && eval "$command -arch=${ARCH:-sm_90}")
readelf -SW "$cubin" 2>/dev/null | sed -nE 's/.*\] \.text\.([^ ]+) +[A-Z]+ +[0-9a-f]+ +[0-9a-f]+ +([0-9a-f]+) .*/\2 \1/p' |
  while read -r hex symbol; do printf '%8d  %s\n' "$((16#$hex))" "$(c++filt <<<"$symbol")"; done |
  grep -E -- "$pattern" | sort -n
