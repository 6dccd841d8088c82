#!/usr/bin/env bash
# Base tools the suite uses directly: sqlite3 (the operator's tool, driven by the CLI tests).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../setup-apt.sh"
need=()
command -v sqlite3 >/dev/null 2>&1 || need+=(sqlite3)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt_install "${need[@]}"
fi
