#!/usr/bin/env bash
# From a fresh Debian 12 machine to a first real run: installs the dependencies, builds, makes a small
# random-weight MoE model with `strata synth` and generates from it (the text is gibberish: the weights
# are random; the point is that the whole path runs).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
mkdir -p build/models
model=build/models/tiny-qwen3moe-iq3_s.gguf
build/bin/strata synth --arch qwen3moe --preset tiny --type iq3_s --output "$model"
build/bin/strata plugins
build/bin/strata generate --model "$model" -p "The experts of a mixture" -n 32 --seed 1
build/bin/strata bench --model "$model" -p 64 -n 32 -r 2
