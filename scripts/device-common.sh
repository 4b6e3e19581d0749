# shellcheck shell=bash
# Steps shared by scripts/device-test.sh and scripts/device-variants.sh (sourced, not run).

# configure_and_build BUILD REFERENCE_DIR LOG_DIR: CMake with CUDA for STRATA_CUDA_ARCHS (default 90; warnings are
# not errors here: the device has another GCC, and CI is where the warnings gate holds), then
# ninja with STRATA_BUILD_JOBS (default all cores); on a failed build, its last lines and status 1.
configure_and_build() {
  local build=$1 reference=$2 logs=$3
  # PCRE2 carried in .deps (scripts/device-deps.sh) where the machine has no headers of its own.
  if [ -d .deps/pcre2 ] && ! pkg-config --exists libpcre2-8 2>/dev/null; then
    export PKG_CONFIG_PATH=$PWD/.deps/pcre2/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTRATA_CUDA=ON \
    -DSTRATA_CUDA_ARCHS="${STRATA_CUDA_ARCHS:-90}" -DSTRATA_REFERENCE_DIR="$reference" -DSTRATA_WERROR=OFF \
    >"$logs/configure.log" 2>&1
  build_tree "$build" "$logs/build.log" "${STRATA_BUILD_JOBS:-$(nproc)}" || { tail -n 40 "$logs/build.log"; return 1; }
}

# build_tree BUILD [LOG [JOBS]]: ninja (its output to LOG, default BUILD/build.log; JOBS default all cores),
# after touching every source whose content differs from what BUILD was last built from. A warm device machine
# keeps BUILD between calls, but the tree copied onto it carries this checkout's times: a file that a variant
# patched and put back can look older than the object built from the patched text, and ninja would keep that
# object (a call's "base" once measured the last call's variant). Called without LOG and JOBS it once failed
# silently and a comparison measured one binary twice: hence the defaults.
build_tree() {
  local build=$1 log=${2:-$1/build.log} jobs=${3:-$(nproc)} sums=$1/source-sums.txt current
  current=$(find sdk core host plugins tests -type f -print0 | sort -z | xargs -0 md5sum)
  if [ -f "$sums" ]; then
    diff <(echo "$current") "$sums" | sed -n 's/^< [0-9a-f]*  //p' | xargs -r touch
  fi
  ninja -C "$build" -j "$jobs" >"$log" 2>&1 || return 1
  echo "$current" >"$sums"
}

# synth_bench_model BUILD MODEL LOG [SYNTH FLAGS...]: the qwen3-30b-a3b IQ3_S model the benchmarks run (with the
# flags given, e.g. --routing-skew 1.0), made once per machine; it is moved into place only when complete, so a
# synth cut short leaves no model for a later run to trust.
synth_bench_model() {
  local build=$1 model=$2 log=$3
  shift 3
  [ -f "$model" ] && return 0
  "$build/bin/strata" synth --arch qwen3moe --preset qwen3-30b-a3b --type iq3_s --threads "$(nproc)" \
    --exact-max-values 1048576 "$@" --output "$model.partial" >"$log" 2>&1 && mv "$model.partial" "$model"
}

# build_kernel_tracer BUILD: scripts/kernel-trace.cpp as BUILD/libkernel-trace.so, against the CUPTI of the
# CUDA that nvcc belongs to.
build_kernel_tracer() {
  local build=$1 cuda
  cuda=$(dirname "$(dirname "$(command -v nvcc)")")
  g++ -std=c++20 -O2 -shared -fPIC -I"$cuda/include" -I"$cuda/extras/CUPTI/include" scripts/kernel-trace.cpp \
    -o "$build/libkernel-trace.so" -L"$cuda/lib64" -L"$cuda/extras/CUPTI/lib64" -L"$cuda/lib" -lcupti \
    -Wl,-rpath,"$cuda/lib64:$cuda/extras/CUPTI/lib64:$cuda/lib"
}

# traced BUILD CSV COMMAND...: runs COMMAND with the tracer loaded, its trace written to CSV.
traced() {
  local build=$1 csv=$2
  shift 2
  CUDA_INJECTION64_PATH="$(realpath "$build")/libkernel-trace.so" STRATA_KERNEL_TRACE="$csv" "$@"
}

# source_profile BUILD MODEL LOG_DIR (never fails: what ncu said is in the files): where one decode step's
# kernels stall, per SASS instruction: ncu's SourceCounters with the finest warp sampling (every 32 cycles)
# over 10 consecutive decode kernels (one layer's, a few steps in: the skip counts the kernels the filter
# matches), exported as LOG_DIR/ncu-decode-source.csv.gz (the source page needs the report file), and their
# sections as text in LOG_DIR/ncu-source-sections.txt.
source_profile() {
  local build=$1 model=$2 logs=$3
  ncu --section SourceCounters --section WarpStateStats --section LaunchStats --section Occupancy \
    --warp-sampling-interval 0 --import-source no --cache-control none --clock-control none \
    -k 'regex:matvec|expert|rms_norm|attention|route' --launch-skip 1950 --launch-count 10 -f -o /tmp/decode-source \
    "$build/bin/strata" bench --model "$model" --backend cuda --no-graphs -p 0 -n 8 -r 1 >/tmp/ncu-source.log 2>&1 || true
  tail -n 3 /tmp/ncu-source.log
  ncu -i /tmp/decode-source.ncu-rep --print-summary none >"$logs/ncu-source-sections.txt" 2>&1 || true
  ncu -i /tmp/decode-source.ncu-rep --page source --print-source sass --csv >/tmp/decode-source.csv 2>&1 ||
    ncu -i /tmp/decode-source.ncu-rep --page source --csv >/tmp/decode-source.csv 2>&1 || true
  cat /tmp/ncu-source.log /tmp/decode-source.csv 2>/dev/null | gzip >"$logs/ncu-decode-source.csv.gz" || true
}
