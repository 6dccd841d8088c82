/**
 * A hostile agent against the receipts (docs/SECURITY.md, "Receipts"): test/agents/forging-agent.mjs reports
 * a tool call with a receipt, a place and a MAC of its own making, and answers citing a made-up receipt,
 * then in a second run one of the first run's real receipts as its own. gated signs the record itself
 * (nothing the agent put on the block is kept), `gated receipts check` calls the made-up receipt forged and,
 * given the citing run, refuses the echoed one, and `gated receipts verify` finds the chains whole.
 */
import { expect, test } from 'vitest';
import { addGroup } from '../../store/groups.js';
import { gatedCli } from '../helpers/cli.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';

const MADE_UP = `gated-receipt:v1:1.1:${'0'.repeat(64)}`;

test('a made-up receipt and an echoed one are never accepted; the records are gated-signed', async () => {
  const g = await startTestGated({
    channels: [],
    http: false,
    env: {
      GATED_IDLE_TIMEOUT_MS: '100',
      GATED_AGENT_CMD: 'node "$GATED_HOME/test/agents/forging-agent.mjs"',
    },
  });
  const { db } = g;
  addGroup(db, g.config.groupsDir, 'club');
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'club')`).run();
  // The chat's first reply after a message (one message at a time).
  const reply = (id: number) =>
    db
      .prepare(
        `SELECT content FROM messages WHERE chat_jid = 'telegram:-1' AND is_from_me = 1 AND id > ? ORDER BY id`,
      )
      .pluck()
      .get(id) as string | undefined;
  const runOf = (id: number) =>
    db.prepare('SELECT run_id FROM messages WHERE id = ?').pluck().get(id) as number;
  const ended = (run: number) =>
    db.prepare('SELECT ended_at IS NOT NULL FROM session_log WHERE id = ?').pluck().get(run) === 1;

  const first = g.gateway.sink({ chat_jid: 'telegram:-1', sender: 'ada', content: 'list the folder' })!;
  await until(() => reply(first) !== undefined, 15_000, 'the first answer');
  const run1 = runOf(first);
  const [real1, claimed1] = reply(first)!
    .split('\n')
    .map((l) => l.replace(/^\w+: /, ''));
  expect(claimed1).toBe(MADE_UP);
  const row1 = db.prepare('SELECT run_id, seq, receipt, decision FROM tool_calls WHERE run_id = ?').get(run1);
  // The record is gated's: its place and MAC, never the block's receipt, seq or mac.
  expect(row1).toEqual({
    run_id: run1,
    seq: 1,
    receipt: expect.stringMatching(/^[0-9a-f]{64}$/),
    decision: 'agent',
  });
  expect((row1 as { receipt: string }).receipt).not.toBe('0'.repeat(64));
  expect(real1).toBe(`gated-receipt:v1:${run1}.1:${(row1 as { receipt: string }).receipt}`);

  const path = g.config.db;
  const madeUp = await gatedCli(path, 'receipts', 'check', claimed1!);
  expect(madeUp).toMatchObject({
    code: 1,
    out: `forged or unknown: run 1 has no record 1 with this receipt\n`,
  });
  expect((await gatedCli(path, 'receipts', 'check', real1!)).code).toBe(0);

  // A second run echoes the first run's real receipt as the receipt of its own call.
  await until(() => ended(run1), 10_000, 'the first run ended');
  const second = g.gateway.sink({ chat_jid: 'telegram:-1', sender: 'ada', content: `claim ${real1}` })!;
  await until(() => reply(second) !== undefined, 15_000, 'the second answer');
  const run2 = runOf(second);
  expect(run2).not.toBe(run1);
  const [real2, claimed2] = reply(second)!
    .split('\n')
    .map((l) => l.replace(/^\w+: /, ''));
  expect(claimed2).toBe(real1);
  const echoed = await gatedCli(path, 'receipts', 'check', claimed2!, '--run', String(run2));
  expect(echoed).toMatchObject({
    code: 1,
    out: `not this run's: the receipt names run ${run1}, not run ${run2}\n`,
  });
  const own = await gatedCli(path, 'receipts', 'check', real2!, '--run', String(run2));
  expect(own.code).toBe(0);
  expect(own.out).toContain(`ok: run ${run2}, record 1: Bash agent by agent`);
  // Neither receipt the agent made is anywhere in the records, and every chain holds.
  expect(db.prepare(`SELECT count(*) FROM tool_calls WHERE receipt = ?`).pluck().get('0'.repeat(64))).toBe(0);
  expect(await gatedCli(path, 'receipts', 'verify')).toMatchObject({
    code: 0,
    out: 'ok: 2 records in 2 runs verify\n',
  });
}, 60_000);
