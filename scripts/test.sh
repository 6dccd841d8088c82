#!/usr/bin/env bash
# The whole test suite: system packages for the real components (Docker engine, PostgreSQL, Redis,
# Chromium, the local atproto network), then types, lint and every test. Nothing is skipped: a component
# that cannot start fails its suite with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ]; then
  echo "node_modules is missing: run 'npm ci' first" >&2
  exit 2
fi
bash scripts/setup.sh
echo "test: typecheck (sources and tests)"
npx tsc --noEmit -p tsconfig.json
echo "test: layout (imports point down, no cycle, folder and file sizes)"
node scripts/layout.mjs
echo "test: lint"
npx eslint .
npx prettier --check . >/dev/null || { npx prettier --check . ; exit 1; }
echo "test: vitest"
npx vitest run "$@"
