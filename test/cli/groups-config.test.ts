/**
 * `gated groups agent` and `gated groups config FOLDER` through the real CLI: the agent, model,
 * instructions, skills, the MCP server started and its tools listed (with the group's secret), commands,
 * and every file that could not be used named, without failing.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { tempDir } from '../helpers/db.js';
import { DEMO_TOKEN, writeGroupConfig } from '../helpers/group-config.js';
import { GATED_BIN } from '../helpers/process.js';

function gated(dir: string, ...args: string[]) {
  const r = spawnSync(process.execPath, [GATED_BIN, ...args], {
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      GATED_DB: join(dir, 'gated.db'),
      GATED_GROUPS_DIR: join(dir, 'groups'),
      GATED_CONFIG_DIR: join(dir, 'config'),
      GATED_CODEX_MODEL: 'gpt-test-default',
      GATED_AGENT_SECRETS: 'ops:DEMO_TOKEN=OPS_DEMO_TOKEN',
      OPS_DEMO_TOKEN: DEMO_TOKEN,
    },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

test('groups config prints what the agent gets and names what it could not use', { timeout: 120_000 }, () => {
  const dir = tempDir('gated-cli-cfg-');
  writeGroupConfig(join(dir, 'config'), 'ops');
  // The groups are made in-process (each CLI start costs seconds on a busy machine); `groups agent` is the CLI's.
  const db = openDatabase(join(dir, 'gated.db'));
  addGroup(db, join(dir, 'groups'), 'ops');
  addGroup(db, join(dir, 'groups'), 'ops/db');
  db.close();
  expect(gated(dir, 'groups', 'agent', 'ops/db', 'codex').out).toContain('agent codex, model default');

  const r = gated(dir, 'groups', 'config', 'ops/db');
  expect(r.code).toBe(0);
  const out = r.out;
  expect(out).toContain(
    'agent: codex\nmodel: gpt-test-default\nruns: node "$GATED_HOME/agents/codex/agent.mjs" (the codex agent\'s command)\n',
  );
  expect(out).toMatch(/instructions: ops\/CLAUDE\.md — Answer as the ship librarian/);
  expect(out).toContain('  haiku (ops/skills/haiku/SKILL.md): Write any answer as a haiku');
  expect(out).toContain('mcp servers: from ops/mcp.json');
  expect(out).toContain('    tools: mcp__demo__lookup');
  expect(out).toContain('commands: /summarize (ops/commands/summarize.md)');
  expect(out).toContain('not used:\n  ops/skills/empty/SKILL.md: is missing\n');
  expect(out).toContain(`ops/mcp.json: server 'broken' needs a "command"`);
  expect(out).not.toContain(DEMO_TOKEN);

  const none = gated(dir, 'groups', 'config', 'sales', '--no-tools');
  expect(none.code).toBe(0);
  // The default agent's name, and what actually runs for it: GATED_AGENT_CMD, the example agent here.
  expect(none.out).toContain(
    `agent: claude\nmodel: (the agent's default)\nruns: node "$GATED_HOME/agents/example/agent.mjs" (GATED_AGENT_CMD)\ninstructions: none`,
  );
  expect(none.out).toContain('not used: nothing');
});
