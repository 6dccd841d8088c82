#!/usr/bin/env bash
# Installs what the Bluesky tests need: PostgreSQL and Redis (the AppView of the local atproto network
# stores its index in them); the pinned @atproto/dev-env package is 31-atproto.npm.sh's.
# Idempotent: checks before installing; apt-get update runs only when a package is missing.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../setup-apt.sh"

missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "30-atproto: installing ${missing[*]}"
  apt_install "${missing[@]}"
fi

# The Debian packages may start a cluster or a redis-server of their own where an init system exists;
# tests start private instances on other ports, so those are left alone.

# PostgreSQL refuses to run as root: the tests run it as this unprivileged user when they are root.
if [ "$(id -u)" = 0 ] && ! id gated-test >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin gated-test
fi
