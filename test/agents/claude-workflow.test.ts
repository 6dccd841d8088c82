/**
 * A workflow on the Claude agent (docs/WORKFLOWS.md) against the local Messages API: plan → approve →
 * implement → review, the implementation a real Write tool call, the gate decided by the operator's CLI from
 * another process; each step one conversation of its own, handed the steps before it.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { tempDir } from '../helpers/db.js';
import { runGatedCli } from '../helpers/cli.js';
import { until } from '../helpers/process.js';
import { useClaudeSuite } from './claude-support.js';

const suite = useClaudeSuite();

const FLOW = `# ship
## plan
Plan: $ARGUMENTS

## approve
needs: plan
approve: Ship this plan?

## implement
needs: approve
WRITE shipped.txt done-by-implement

## review
needs: implement
Review: $STEP_implement
`;

test('plan → approve → implement → review on the Claude agent', { timeout: 120_000 }, async () => {
  const configDir = tempDir();
  mkdirSync(join(configDir, 'claude', 'workflows'), { recursive: true });
  writeFileSync(join(configDir, 'claude', 'workflows', 'ship.md'), FLOW);
  const chat = await suite.start({ env: { GATED_CONFIG_DIR: configDir, GATED_IDLE_TIMEOUT_MS: '500' } });
  const { gated } = chat;
  const get = (sql: string) => gated.db.prepare(sql).pluck().get();
  chat.send('/workflow run ship a release note');
  const code = await until(
    () => get(`SELECT code FROM tool_approvals WHERE state = 'pending'`) as string | undefined,
    60_000,
    'the gate asks',
  );
  const plan = get(`SELECT content FROM messages WHERE kind = 'reply' ORDER BY id LIMIT 1`) as string;
  expect(plan).toContain('Plan: a release note');
  expect(existsSync(join(chat.groupDir, 'shipped.txt'))).toBe(false);

  const cli = await runGatedCli(
    gated.config.db,
    { GATED_CONFIG_DIR: configDir },
    'approvals',
    'approve',
    code,
  );
  expect(cli.code, cli.err).toBe(0);
  await until(() => get(`SELECT state FROM workflow_runs WHERE id = 1`) === 'done', 90_000, 'the run done');

  expect(readFileSync(join(chat.groupDir, 'shipped.txt'), 'utf8')).toBe('done-by-implement');
  const replies = gated.db
    .prepare(
      `SELECT m.target, o.content FROM messages m JOIN messages o ON o.reply_to_id = m.id AND o.kind = 'reply'
       WHERE m.verb = 'workflow' ORDER BY m.id`,
    )
    .all() as Array<{ target: string; content: string }>;
  expect(replies.map((r) => r.target)).toEqual([
    'workflow:1/plan',
    'workflow:1/implement',
    'workflow:1/review',
  ]);
  // The review's conversation carried the implementation's answer, and the implementation's the plan.
  const users = suite.api.turns.map((r) => suite.api.seenUserWords(r).join('\n'));
  const implement = users.find((u) => u.includes('WRITE shipped.txt'))!;
  expect(implement).toContain('Output of step plan:');
  expect(implement).toContain('Plan: a release note');
  const review = users.find((u) => u.includes('Review:'))!;
  expect(review).toContain(replies[1]!.content.split('\n')[0]);
  // Each step in a session of its own: three runs, one per step.
  expect(
    gated.db.prepare(`SELECT count(DISTINCT topic) FROM session_log WHERE topic LIKE 'wf1-%'`).pluck().get(),
  ).toBe(3);
});
