/**
 * Costs checked while a run spends (docs/COSTS.md, "While a run spends"), with the real Claude agent against
 * the local Messages API: a turn of three tool calls whose sender's daily token cap is crossed by the usage
 * the first call's end reports. The run pauses at the next call and asks the group's approvers (a
 * `gated:budget` tool approval); approved, a budget_grants row lets it go on and the turn ends as it would
 * have; rejected, the remaining calls are refused with a note the model reads, the answer it gives is
 * delivered with gated's note, and a later message of the sender is held, never answered twice.
 */
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { setSenderLimits } from '../../store/limits.js';
import { gatedCli } from '../helpers/cli.js';
import { until } from '../helpers/process.js';
import { useClaudeSuite } from './claude-support.js';

const suite = useClaudeSuite();
const SHELL_AGENT = `GATED_CLAUDE_SHELL=1 node '${join(process.cwd(), 'agents', 'claude', 'agent.mjs')}'`;
const CALLS: Array<[string, Record<string, unknown>]> = [
  ['Bash', { command: 'echo one' }],
  ['Bash', { command: 'echo two' }],
  ['Bash', { command: 'echo three' }],
];

/**
 * A gated whose sender web:ada may spend 20 tokens a day, and ada's turn of `n` tool calls: each answer of
 * the scripted model reports 26 tokens (25 in, 1 out) with its call's end, so the first call crosses the cap.
 */
async function startCapped(n: number) {
  const chat = await suite.start({ env: { GATED_AGENT_CMD: SHELL_AGENT } });
  const db = chat.gated.db;
  setSenderLimits(db, chat.group, 'web:ada', { runsPerDay: null, costPerDayUsd: null, tokensPerDay: 20 });
  const id = chat.send(`CALLS ${JSON.stringify(CALLS.slice(0, n))}`);
  const question = await until(
    () =>
      db.prepare(`SELECT * FROM tool_approvals WHERE tool = 'gated:budget' AND state = 'pending'`).get() as
        { id: number; code: string; input_line: string; run_id: number } | undefined,
    60_000,
    'the budget question',
  );
  const calls = () =>
    db
      .prepare('SELECT tool, decision, decided_by, error FROM tool_calls WHERE run_id = ? ORDER BY id')
      .all(question.run_id) as Array<{
      tool: string;
      decision: string;
      decided_by: string | null;
      error: string | null;
    }>;
  return { chat, db, id, question, calls };
}

test(
  'a sender over their token cap mid-turn: paused at the next call, asked, and going on when approved',
  { timeout: 120_000 },
  async () => {
    const { chat, db, id, question, calls } = await startCapped(2);
    expect(question.input_line).toMatch(
      /^web:ada in claude reached the daily agent tokens cap \(\d+ tokens of 20 tokens\)$/,
    );
    // Paused: the first call ran, the second waits.
    expect(calls().map((c) => c.decision)).toEqual(['allow']);
    const asked = db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND content LIKE '%over a daily cap%'`)
      .pluck()
      .get();
    expect(asked).toMatch(new RegExp(`/approve ${question.code} for one more budget`));

    const ok = await gatedCli(chat.gated.config.db, 'approvals', 'approve', question.code);
    expect(ok.code, ok.err).toBe(0);
    const answer = await chat.reply(id);
    expect(answer.split('\n')[0]).toBe('Calls done.');
    expect(answer).not.toMatch(/gated stopped/);
    expect(db.prepare('SELECT sender, kind, amount, approval_id FROM budget_grants').all()).toEqual([
      { sender: 'web:ada', kind: 'tokens', amount: 20, approval_id: question.id },
    ]);
    // Both calls ran, the second once approved; one question was asked, and answered once.
    expect(calls().map((c) => [c.tool, c.decision])).toEqual([
      ['Bash', 'allow'],
      ['Bash', 'allow'],
    ]);
    expect(
      db.prepare(`SELECT state, decided_by, used_at IS NOT NULL AS used FROM tool_approvals`).all(),
    ).toEqual([{ state: 'approved', decided_by: 'cli:root', used: 1 }]);
    expect(
      db.prepare('SELECT count(*) FROM messages WHERE is_from_me = 1 AND reply_to_id = ?').pluck().get(id),
    ).toBe(1);
  },
);

test(
  'a sender over their token cap mid-turn, rejected: the rest of the calls refused, the answer so far delivered with a note, nothing answered twice',
  { timeout: 120_000 },
  async () => {
    const { chat, db, id, question, calls } = await startCapped(3);
    const no = await gatedCli(
      chat.gated.config.db,
      'approvals',
      'reject',
      question.code,
      '--note',
      'enough for today',
    );
    expect(no.code, no.err).toBe(0);
    const answer = await chat.reply(id);
    expect(answer.split('\n')[0]).toBe('Calls done.');
    expect(answer).toMatch(
      /\(gated stopped this run here: web:ada in claude reached the daily agent tokens cap \(26 tokens of 20 tokens\); cli:root said stop \(enough for today\)\. This answer is what the agent had so far\.\)$/,
    );
    // The first call ran; the two after the cap were refused, sealed with the reason the model read.
    const rows = calls();
    expect(rows.map((c) => c.decision)).toEqual(['allow', 'deny', 'deny']);
    for (const c of rows.slice(1)) {
      expect(c.decided_by).toBe('budget');
      expect(c.error).toMatch(/^stopped: web:ada in claude reached the daily agent tokens cap/);
    }
    expect(db.prepare('SELECT count(*) FROM budget_grants').pluck().get()).toBe(0);
    expect(
      db.prepare('SELECT count(*) FROM messages WHERE is_from_me = 1 AND reply_to_id = ?').pluck().get(id),
    ).toBe(1);
    // The model was told, with each refused call's receipt beside it.
    const told = JSON.stringify(suite.api.turns.at(-1)!.body.messages);
    expect(told).toMatch(/Refused: stopped: web:ada in claude reached the daily agent tokens cap/);

    // Ada's next message finds her over her cap before any run: held, told once, never answered.
    const next = chat.send('and one more thing');
    await until(
      () => db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(next) === 'limited',
      30_000,
      'the next message held',
    );
    const toNext = db.prepare('SELECT content FROM messages WHERE reply_to_id = ?').pluck().all(next);
    expect(toNext).toEqual([expect.stringMatching(/^Limit reached \(20 agent tokens per day per sender\)/)]);
    expect(chat.runs()).toHaveLength(1);
  },
);
