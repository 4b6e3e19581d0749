#!/usr/bin/env bash
# From a fresh Debian 12 machine to a first real run: installs dependencies, builds, lists the plugins and
# inspects a model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build/bin/strata plugins
build/bin/strata inspect tests/fuzz/corpus/all-value-types.gguf
