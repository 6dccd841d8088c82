/**
 * The dashboard's usage panel (docs/COSTS.md) in a real Chromium: a real gated whose agent reports tokens
 * mid-turn and with its answer, priced by a model row, for two senders in two groups today, and an earlier
 * day's reports written with sqlite3 as an earlier run would have left them. The charts' totals equal what
 * usage_reports holds, their lines are the groups and the people, and the caps of a group and of its
 * senders are listed with what each used today.
 */
import { expect, test } from 'vitest';
import { setLimits } from '../../store/access.js';
import { addGroup } from '../../store/groups.js';
import { DAY, dayOf, setSenderLimits } from '../../store/limits.js';
import { usageOf } from '../../store/usage.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { launchChromium, screenshotPath, strictPage } from './chromium.js';
import { USAGE_AGENT } from '../helpers/usage-agent.js';

test('usage per group, person and day as charts, and the daily caps with what was used today', async () => {
  const g = await startTestGated({
    channels: [],
    env: { GATED_IDLE_TIMEOUT_MS: '200', GATED_AGENT_CMD: USAGE_AGENT },
  });
  const { db } = g;
  addGroup(db, g.config.groupsDir, 'club');
  addGroup(db, g.config.groupsDir, 'lounge');
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'club')`).run();
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (1, 'platform=discord', 'lounge')`).run();
  usageOf(db).setPrice('m-test', 3, 15);
  // Caps that the day's use stays under (a cap reached would pause the run and ask).
  setSenderLimits(db, 'club', 'telegram:ada', { runsPerDay: 10, costPerDayUsd: 0.04, tokensPerDay: null });
  setSenderLimits(db, 'club', '*', { runsPerDay: null, costPerDayUsd: 1, tokensPerDay: null });
  setLimits(db, 'lounge', { senderPerHour: null, runsPerDay: null, costPerDayUsd: null, tokensPerDay: 8000 });

  const state = (id: number) => db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id);
  const ada = g.gateway.sink({ chat_jid: 'telegram:-1', sender: 'ada', content: 'one' })!;
  await until(() => state(ada) === 'done', 15_000, "ada's answer");
  const bob = g.gateway.sink({ chat_jid: 'discord:2', sender: 'bob', content: 'two' })!;
  await until(() => state(bob) === 'done', 15_000, "bob's answer");
  // Two days ago: bob in club, and ada with more than today (the person chart's biggest line).
  const earlier = dayOf(Date.now()) - 2 * DAY + 3_600_000;
  const insert = db.prepare(
    `INSERT INTO usage_reports (run_id, group_folder, sender, model, at, input_tokens, output_tokens, cost_usd)
     VALUES (0, ?, ?, 'm-test', ?, ?, ?, ?)`,
  );
  insert.run('club', 'telegram:ada', earlier, 5000, 5000, 0.09);
  insert.run('club', 'discord:bob', earlier, 100, 0, 0.0003);

  const sum = (sql: string) => db.prepare(sql).pluck().get() as number;
  const cost = Math.round(sum('SELECT sum(cost_usd) FROM usage_reports') * 1e6) / 1e6;
  const tokens = sum('SELECT sum(input_tokens + output_tokens) FROM usage_reports');
  expect(tokens).toBe(6000 + 10_100);

  const browser = await launchChromium();
  const { page, errors } = await strictPage(browser);
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.goto(`${g.url}/dashboard`);
  const chart = (id: string) => page.locator(`#usage-${id}`);
  const total = async (id: string) =>
    Number(await chart(id).locator('.total[data-value]').getAttribute('data-value'));
  await chart('sender-tokens').locator('.total[data-value]').waitFor();
  await chart('group-cost').locator('.u-wrap canvas').first().waitFor();
  expect(await total('group-cost')).toBe(cost);
  expect(await total('sender-cost')).toBe(cost);
  expect(await total('group-tokens')).toBe(tokens);
  expect(await total('sender-tokens')).toBe(tokens);
  // Lines by what they add up to, biggest first.
  expect(await chart('group-cost').getAttribute('data-lines')).toBe('club|lounge');
  expect(await chart('sender-cost').getAttribute('data-lines')).toBe('telegram:ada|discord:bob');
  // The legend shows each line's latest day (today): ada's 0.033, bob's 0.033 in lounge.
  const legend = await chart('group-cost').locator('.u-legend .u-series .u-value').allTextContents();
  expect(legend.slice(1)).toEqual(['0.033', '0.033']);

  const limits = page.locator('#usage-limits');
  await page.locator('#usage-limits[data-count="3"]').waitFor();
  const row = (id: string) => limits.locator(`tr[data-id="${id}"]`);
  expect(await row('club/telegram:ada').textContent()).toContain('1 of 10 runs, $0.03 of $0.04');
  expect(await row('club/telegram:ada').locator('.share').textContent()).toBe('83 %');
  expect(await row('club/telegram:ada').locator('.share.bad').count()).toBe(1);
  expect(await row('club/*').textContent()).toContain('each sender without a row of their own');
  expect(await row('lounge/').textContent()).toContain('(the group)');
  expect(await row('lounge/').textContent()).toContain('3,000 of 8,000 tokens');
  expect(await row('lounge/').locator('.share.bad').count()).toBe(0);
  // The price rows the reports without a cost were priced by.
  expect(await page.locator('#usage-prices tr.price').count()).toBe(1);
  expect(await page.locator('#usage-prices tr[data-id="m-test"] td').allTextContents()).toEqual([
    'm-test',
    '3',
    '15',
  ]);
  await page.screenshot({ path: screenshotPath('usage.png'), fullPage: true });
  expect(errors).toEqual([]);
}, 90_000);
