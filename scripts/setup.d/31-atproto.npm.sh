#!/usr/bin/env bash
# Installs the pinned @atproto/dev-env package (the local atproto network of the Bluesky tests) under
# test/infra/atproto, from its own lock. Idempotent: nothing when its node_modules matches the lock.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
infra="$root/test/infra/atproto"
if ! node "$root/scripts/lock-current.mjs" "$infra"; then
  echo "31-atproto: npm ci in test/infra/atproto"
  flock /tmp/gated-npm.lock npm ci --prefix "$infra" --no-audit --no-fund --loglevel=error
fi
