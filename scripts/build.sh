#!/usr/bin/env bash
# Configures and builds into build/ (the executable lands at build/bin/strata), or into STRATA_BUILD_DIR when
# set. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${STRATA_BUILD_JOBS:-$(nproc)}
build=${STRATA_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
ninja -C "$build" -j "$jobs"
