#!/usr/bin/env bash
# Installs the build and test dependencies from Debian's packages (Debian 12). Needs root.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git python3
  libboost-dev libboost-filesystem-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libpcre2-dev libssl-dev
  clang libclang-rt-dev clang-format
  prometheus  # promtool, which checks the server's /metrics in a test
)
# node and npm run the official OpenAI client in the server's tests (scripts/install-clients.sh): Debian's, unless
# the machine has them already (NodeSource's nodejs ships its own npm, which Debian's npm package conflicts with).
command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  SUDO=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
