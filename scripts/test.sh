#!/usr/bin/env bash
# The whole test suite: system packages for the real components (Docker engine, PostgreSQL, Redis,
# Chromium, the local atproto network), then types, layout, lint and every test. Nothing is skipped: a
# component that cannot start fails its suite with the reason.
#
# The checks (typecheck, layout, eslint, prettier) run at once, beside vitest: they use the CPU while the
# test files mostly wait on real servers. Their output is kept apart and printed after vitest's, each
# under its name, and the run fails if any of them or vitest failed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ]; then
  echo "node_modules is missing: run 'npm ci' first" >&2
  exit 2
fi
bash scripts/setup.sh

logs=$(mktemp -d "${TMPDIR:-/tmp}/gated-checks.XXXXXX")
trap 'rm -rf "$logs"' EXIT
# check NAME COMMAND...: runs it in the background, its output in $logs/NAME.log, its status in NAME.rc.
check() {
  local name=$1
  shift
  ("$@" >"$logs/$name.log" 2>&1; echo $? >"$logs/$name.rc") &
}
echo "test: typecheck, layout, eslint and prettier, beside vitest"
check typecheck npx tsc --noEmit -p tsconfig.json
check layout node scripts/layout.mjs
check eslint npx eslint .
check prettier npx prettier --check .

echo "test: vitest"
vitest=0
npx vitest run "$@" || vitest=$?
wait

failed=()
for name in typecheck layout eslint prettier; do
  if [ "$(cat "$logs/$name.rc")" = 0 ]; then
    echo "test: $name ok"
  else
    echo "test: $name FAILED:"
    cat "$logs/$name.log"
    failed+=("$name")
  fi
done
[ "$vitest" = 0 ] || failed+=(vitest)
if [ ${#failed[@]} -gt 0 ]; then
  echo "test: failed: ${failed[*]}" >&2
  exit 1
fi
