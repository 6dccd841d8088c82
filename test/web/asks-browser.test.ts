/**
 * A question whose turn is interrupted, in the web chat in Chromium (docs/APPROVALS.md, "One ask, one
 * answer"): the whole gated with an agent that asks in the middle of its turn
 * (test/queue/agents/ask-agent.mjs) and a rule that asks about Bash. The question shows Approve and Reject;
 * after `/interrupt` the same line says the ask was cancelled and has no button left, live and after a
 * reload, and the agent got one `deny` for it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { startDemoGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { launchChromium, strictPage } from './chromium.js';

const AGENT = packageFile('test', 'queue', 'agents', 'ask-agent.mjs');

it('after /interrupt the question line says cancelled and has no buttons, also after a reload', async () => {
  const g = await startDemoGated({
    GATED_IDLE_TIMEOUT_MS: '2000',
    GATED_AGENT_CMD: `THINK_MS=100 exec node "${AGENT}"`,
  });
  const config = g.config;
  g.db
    .prepare(`INSERT INTO tool_rules (group_folder, seq, tool, decision) VALUES ('demo', 1, 'Bash', 'ask')`)
    .run();
  const browser = await launchChromium();
  const { page, errors } = await strictPage(browser);
  await page.goto(`${g.url}/#demo`);
  const pane = page.locator('.pane[data-topic=""]');
  await pane.locator('.conn[data-state="live"]').waitFor();
  const say = async (text: string) => {
    await pane.locator('textarea').fill(text);
    await pane.locator('textarea').press('Enter');
  };
  await say(`!ask ${JSON.stringify({ tool: 'Bash', input: { command: 'make deploy' }, summary: 'deploy' })}`);
  const question = pane.locator('.line.status', { hasText: 'make deploy' });
  await question.locator('.approval[data-state="pending"] button.approve').waitFor({ timeout: 20_000 });

  await say('/interrupt');
  await pane.locator('.line', { hasText: 'turn 1 interrupted' }).waitFor({ timeout: 20_000 });
  const cancelled = question.locator('.approval[data-state="cancelled"]');
  await cancelled.waitFor({ timeout: 15_000 });
  expect(await question.locator('button').count()).toBe(0);
  await page.reload();
  await question.locator('.approval[data-state="cancelled"]').waitFor({ timeout: 15_000 });
  expect(await question.locator('button').count()).toBe(0);

  const log = join(config.groupsDir, 'demo', 'agent-log.jsonl');
  const permissions = await until(
    () => {
      const got = existsSync(log)
        ? readFileSync(log, 'utf8')
            .split('\n')
            .filter(Boolean)
            .map((l) => JSON.parse(l) as { ev: string; decision?: string; note?: string })
            .filter((e) => e.ev === 'permission')
        : [];
      return got.length > 0 && got;
    },
    10_000,
    'the permission line',
  );
  expect(permissions.map((p) => [p.decision, p.note])).toEqual([
    ['deny', 'cancelled: the turn was interrupted'],
  ]);
  expect(existsSync(join(config.groupsDir, 'demo', '.tool-runs.log'))).toBe(false);
  expect(g.db.prepare('SELECT state FROM tool_approvals').pluck().all()).toEqual(['cancelled']);
  expect(errors).toEqual([]);
}, 90_000);
