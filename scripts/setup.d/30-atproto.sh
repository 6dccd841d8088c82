#!/usr/bin/env bash
# Installs what the Bluesky tests need: PostgreSQL and Redis (the AppView of the local atproto network
# stores its index in them) and the pinned @atproto/dev-env package under test/infra/atproto.
# Idempotent: checks before installing; apt-get update runs only when a package is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export DEBIAN_FRONTEND=noninteractive

missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "30-atproto: installing ${missing[*]}"
  # Other setup scripts may hold the dpkg lock: wait for it instead of failing.
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Debian packages may start a cluster or a redis-server of their own where an init system exists;
# tests start private instances on other ports, so those are left alone.

# PostgreSQL refuses to run as root: the tests run it as this unprivileged user when they are root.
if [ "$(id -u)" = 0 ] && ! id gated-test >/dev/null 2>&1; then
  useradd --system --no-create-home --shell /usr/sbin/nologin gated-test
fi

infra="$root/test/infra/atproto"
stamp="$infra/node_modules/.package-lock.json"
if [ ! -f "$stamp" ] || [ "$infra/package-lock.json" -nt "$stamp" ]; then
  echo "30-atproto: npm ci in test/infra/atproto"
  flock /tmp/gated-npm.lock npm ci --prefix "$infra" --no-audit --no-fund --loglevel=error
fi
