#!/bin/sh
# The Codex CLI as the agent starts it (agents/codex/cli.mjs): the binary the SDK would run
# ($GATED_CODEX_BIN), with hooks allowed to run without a trust prompt, so that the agent's PreToolUse
# hook asks gated before the CLI's own tools (docs/AGENTS.md, "The Codex agent").
exec "$GATED_CODEX_BIN" --dangerously-bypass-hook-trust "$@"
