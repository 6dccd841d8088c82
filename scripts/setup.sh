#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian machine, idempotently: each scripts/setup.d/*.sh
# checks before it installs, so a second run is quick. Run as root (CI is root) or with sudo rights.
set -euo pipefail
cd "$(dirname "$0")/.."
for step in scripts/setup.d/*.sh; do
  echo "setup: $step"
  bash "$step"
done
