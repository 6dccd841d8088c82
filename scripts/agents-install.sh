#!/usr/bin/env bash
# Installs the bundled agents' own dependencies, each from its own lock, into its own folder: the Claude
# Agent SDK (with the Claude Code CLI) in agents/claude/node_modules, the Codex SDK (with the Codex CLI) and
# the MCP SDK in agents/codex/node_modules. gated and the example agent need neither, so the root `npm ci`
# leaves them out (about 800 MB); run this (`npm run agents:install`) before running either agent as a
# process on this machine, or building its image with docker/build-offline.sh. Their production images
# install the same locks themselves (agents/*/Dockerfile). The test setup runs it (scripts/setup.d).
#
# Usage: scripts/agents-install.sh [claude|codex ...]   (default: both)
# Idempotent: an agent whose node_modules was installed from its current lock is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."

agents=("$@")
[ ${#agents[@]} -gt 0 ] || agents=(claude codex)
for name in "${agents[@]}"; do
  dir=agents/$name
  if [ ! -f "$dir/package-lock.json" ]; then
    echo "agents-install: no agent '$name' with a package-lock.json (agents/claude, agents/codex)" >&2
    exit 2
  fi
  # What npm installed, compared with the lock by content (a checkout rewrites the lock unchanged).
  if node scripts/lock-current.mjs "$dir" --omit-dev; then
    echo "agents-install: $dir is up to date"
    continue
  fi
  echo "agents-install: npm ci in $dir"
  # Several checkouts may install at once on one machine: one npm at a time keeps the shared cache sound.
  flock /tmp/gated-npm.lock npm ci --prefix "$dir" --omit=dev --no-audit --no-fund --loglevel=error
done
