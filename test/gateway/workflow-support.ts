/**
 * What the workflow tests share (docs/WORKFLOWS.md): the configuration folder of group `ops` with its
 * workflow files and command file, and the agent profiles its steps name.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Db } from '../../store/db.js';

/** GATED_AGENT_CMD-style command of test/gateway/agents/workflow-agent.mjs. */
export const WORKFLOW_AGENT_CMD = 'node "$GATED_HOME/test/gateway/agents/workflow-agent.mjs"';
/** The example agent shipped in agents/example. */
export const EXAMPLE_AGENT_CMD = 'node "$GATED_HOME/agents/example/agent.mjs"';

/** plan → approve → implement → review; implement runs a command file, review another agent and model. */
export const SHIP = `# ship
description: Plan a change, wait for an owner, implement it, review it

## plan
Plan: $ARGUMENTS

## approve
needs: plan
approve: Go ahead with this plan?

## implement
needs: approve
command: implement

## review
needs: implement
agent: reviewer
model: careful-1
Review this: $STEP_implement
`;

/** Two steps that may run at once, then one that needs both. */
export const FANOUT = `# fanout
## left
!barrier 2 left $ARGUMENTS

## right
!barrier 2 right $ARGUMENTS

## join
needs: left, right
Join them.
`;

/** A step that holds until released (kill -9 inside it), between two quick ones. */
export const HOLD = `# hold
## first
First: $ARGUMENTS

## middle
needs: first
!hold middle

## last
needs: middle
Last.
`;

/** A workflow file with a cycle and an unknown dependency: refused with its lines. */
export const BROKEN = `# broken
## a
needs: b
A

## b
needs: a
B

## c
needs: nowhere
C
`;

/** Writes ops's configuration under `configDir` with the given workflow files (name → text). */
export function writeWorkflows(configDir: string, files: Record<string, string>, folder = 'ops'): void {
  const dir = join(configDir, folder);
  mkdirSync(join(dir, 'workflows'), { recursive: true });
  mkdirSync(join(dir, 'commands'), { recursive: true });
  writeFileSync(join(dir, 'commands', 'implement.md'), 'Implement the plan for: $ARGUMENTS\n');
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, 'workflows', `${name}.md`), text);
}

/** The agent profiles the workflows name: `reviewer` (the workflow agent) and `example`. */
export function addProfiles(db: Db, reviewerCmd = WORKFLOW_AGENT_CMD): void {
  const add = db.prepare('INSERT OR REPLACE INTO agent_profiles (name, command) VALUES (?, ?)');
  add.run('reviewer', reviewerCmd);
  add.run('example', EXAMPLE_AGENT_CMD);
}
