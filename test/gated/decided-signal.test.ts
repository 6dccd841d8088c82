/**
 * A decision reaches the waiting agent through the `decided` signal (core/signals.ts), not through the
 * database's file watcher: with the watcher off and a poll interval of a minute (so no timer looks within
 * the test), a typed `/approve` still answers the agent's ask, and the agent's answer follows.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { addGroup } from '../../store/groups.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';

const AGENT = packageFile('test', 'queue', 'agents', 'ask-agent.mjs');

it('/approve answers the ask with no file watcher and no timer: the decided signal carries it', async () => {
  const g = await startTestGated({
    http: false,
    channels: [],
    watchCommits: false,
    env: {
      GATED_POLL_MS: '60000',
      GATED_ADMINS: 'local:boss',
      GATED_AGENT_CMD: `THINK_MS=0 exec node "${AGENT}"`,
    },
  });
  addGroup(g.db, g.config.groupsDir, 'ops');
  g.db
    .prepare(`INSERT INTO tool_rules (group_folder, seq, tool, decision) VALUES ('ops', 1, 'Bash', 'ask')`)
    .run();
  let decided = 0;
  g.signals.decided.on(() => decided++);
  const ask = { tool: 'Bash', input: { command: 'touch x' }, summary: 'a file' };
  g.gateway.sink({ chat_jid: 'local:ops', sender: 'boss', content: `!ask ${JSON.stringify(ask)}` });
  const code = await until(
    () =>
      g.db.prepare(`SELECT code FROM tool_approvals WHERE state = 'pending'`).pluck().get() as
        string | undefined,
    10_000,
    'the question',
  );
  expect(decided).toBe(0);
  g.gateway.sink({ chat_jid: 'local:ops', sender: 'boss', content: `/approve ${code}` });
  const answer = await until(
    () =>
      g.db
        .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND content LIKE '%tool Bash ran%'`)
        .pluck()
        .get() as string | undefined,
    10_000,
    "the agent's answer",
  );
  expect(answer).toContain('did turn 1');
  expect(decided).toBe(1);
  const runs = readFileSync(join(g.config.groupsDir, 'ops', '.tool-runs.log'), 'utf8');
  expect(runs.trim()).toBe('Bash {"command":"touch x"}');
});
