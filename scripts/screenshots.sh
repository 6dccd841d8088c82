#!/usr/bin/env bash
# Takes the README's screenshots again: runs the browser tests with their pictures written into a fresh
# folder, then copies every picture into docs/screenshots/. Tests never write into the tracked tree; this
# explicit step is the only one that does.
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
GATED_SCREENSHOTS_DIR="$out" npx vitest run "${@:-test/web}"
mkdir -p docs/screenshots
shopt -s nullglob
shots=("$out"/*.png)
[ "${#shots[@]}" -gt 0 ] || { echo "screenshots: the tests wrote no pictures" >&2; exit 1; }
cp "${shots[@]}" docs/screenshots/
echo "screenshots: ${#shots[@]} pictures copied into docs/screenshots/"
