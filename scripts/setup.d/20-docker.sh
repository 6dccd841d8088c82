#!/usr/bin/env bash
# Installs the Docker engine (Debian docker.io) that the docker runtime's tests start on their own socket
# (test/infra/dockerd.ts). Idempotent: does nothing when dockerd is already present. No service is started
# here; the tests start and stop their own dockerd.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../setup-apt.sh"

if command -v dockerd >/dev/null 2>&1 && command -v runc >/dev/null 2>&1; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "20-docker.sh: root is needed to install docker.io" >&2
  exit 1
fi
apt_install docker.io
command -v dockerd >/dev/null
echo "20-docker.sh: docker.io installed ($(dockerd --version))"
