#!/usr/bin/env bash
# Installs the Claude and Codex agents' own dependencies (agents/claude, agents/codex, each from its own
# lock) that the agent tests run: the root `npm ci` leaves them out. Idempotent (scripts/agents-install.sh).
set -euo pipefail
bash "$(dirname "${BASH_SOURCE[0]}")/../agents-install.sh"
