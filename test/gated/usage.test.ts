/**
 * Usage per person (docs/COSTS.md): a real gated with an agent that reports tokens without a cost, mid-turn
 * (with a tool call's end) and with its answer. Each report is credited to the sender of its turn and priced
 * by its model's price row set with `gated prices set`; the run's session_log row sums them, and
 * `gated usage` lists the day per group and sender.
 */
import { expect, test } from 'vitest';
import { addGroup } from '../../store/groups.js';
import { gatedCli } from '../helpers/cli.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { USAGE_AGENT } from '../helpers/usage-agent.js';

test('usage without a cost is priced by the model, credited per sender, summed on the run, listed by gated usage', async () => {
  const g = await startTestGated({
    channels: [],
    http: false,
    env: { GATED_IDLE_TIMEOUT_MS: '200', GATED_AGENT_CMD: USAGE_AGENT },
  });
  addGroup(g.db, g.config.groupsDir, 'club');
  g.db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'club')`).run();
  const path = g.config.db;
  expect((await gatedCli(path, 'prices', 'set', 'm-test', '3', '15')).out).toBe(
    'm-test: $3 per million input tokens, $15 per million output tokens\n',
  );
  expect((await gatedCli(path, 'prices', 'set', 'm-test', 'cheap', '1')).code).toBe(2);
  const state = (id: number) => g.db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id);
  const ada = g.gateway.sink({ chat_jid: 'telegram:-1', sender: 'ada', content: 'one' })!;
  await until(() => state(ada) === 'done', 15_000, "ada's answer");
  const bob = g.gateway.sink({ chat_jid: 'telegram:-2', sender: 'bob', content: 'two' })!;
  await until(() => state(bob) === 'done', 15_000, "bob's answer");

  const reports = g.db
    .prepare('SELECT sender, model, input_tokens, output_tokens, cost_usd FROM usage_reports ORDER BY id')
    .all();
  expect(reports).toEqual([
    { sender: 'telegram:ada', model: 'm-test', input_tokens: 1000, output_tokens: 0, cost_usd: 0.003 },
    { sender: 'telegram:ada', model: 'm-test', input_tokens: 0, output_tokens: 2000, cost_usd: 0.03 },
    { sender: 'telegram:bob', model: 'm-test', input_tokens: 1000, output_tokens: 0, cost_usd: 0.003 },
    { sender: 'telegram:bob', model: 'm-test', input_tokens: 0, output_tokens: 2000, cost_usd: 0.03 },
  ]);
  const runs = g.db
    .prepare('SELECT input_tokens, output_tokens, round(cost_usd, 6) AS cost FROM session_log ORDER BY id')
    .all();
  expect(runs).toEqual([
    { input_tokens: 1000, output_tokens: 2000, cost: 0.033 },
    { input_tokens: 1000, output_tokens: 2000, cost: 0.033 },
  ]);
  // The tool call the agent reported without asking is on record too.
  expect(g.db.prepare(`SELECT tool, decision FROM tool_calls ORDER BY id`).all()).toEqual([
    { tool: 'Bash', decision: 'agent' },
    { tool: 'Bash', decision: 'agent' },
  ]);

  const usage = await gatedCli(path, 'usage', '--group', 'club');
  const lines = usage.out.trim().split('\n');
  expect(lines[0]).toBe('day\tgroup\tsender\treports\tinput tokens\toutput tokens\tcost usd');
  expect(lines.slice(1).map((l) => l.split('\t').slice(1))).toEqual([
    ['club', 'telegram:ada', '2', '1000', '2000', '0.033000'],
    ['club', 'telegram:bob', '2', '1000', '2000', '0.033000'],
  ]);
  expect((await gatedCli(path, 'prices', 'rm', 'm-test')).out).toBe('price of m-test removed\n');
  expect((await gatedCli(path, 'prices', 'rm', 'm-test')).code).toBe(2);
});
