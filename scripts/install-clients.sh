#!/usr/bin/env bash
# Installs the clients the server's tests run unchanged (tests/clients/package.json: the official `openai` npm
# package) from the npm registry into tests/clients/node_modules; nothing to do when they are there already.
# Needs node and npm (scripts/install-deps.sh). scripts/test.sh calls it.
set -euo pipefail
cd "$(dirname "$0")/../tests/clients"
wanted=$(node -p "require('./package.json').dependencies.openai")
have=$(node -p "try { require('./node_modules/openai/package.json').version } catch { '' }")
[ "$have" = "$wanted" ] && exit 0
npm install --no-audit --no-fund --no-package-lock --loglevel=error
