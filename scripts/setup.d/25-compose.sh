#!/usr/bin/env bash
# Installs Compose for the test that runs gated's image with docker/compose.yaml (test/gated/image.test.ts).
# This machine's docker CLI has no `compose` plugin and Debian 12 ships none; its `docker-compose` package
# (Compose 1.29, Python) reads the same file. Idempotent: does nothing when either is present.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../setup-apt.sh"

if docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "25-compose.sh: root is needed to install docker-compose" >&2
  exit 1
fi
apt_install docker-compose
command -v docker-compose >/dev/null
echo "25-compose.sh: $(docker-compose version --short) installed"
