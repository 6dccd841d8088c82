/**
 * Costs checked while a run spends (docs/COSTS.md, "While a run spends"), at the other pause point: the next
 * turn. A real gated whose agent holds its first answer until the test lets it go, so that the sender's
 * second message is taken (under her cap) and waits for the run's next turn; the first answer's usage then
 * crosses her daily cost cap. The run pauses before feeding the second message and asks the group's
 * approvers; approved it goes on (the second message answered, once), rejected it stops (the second
 * message kept limited, told once, never answered). The question is decided once either way.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { groupDirOf } from '../../core/group-dir.js';
import { addGroup } from '../../store/groups.js';
import { setSenderLimits } from '../../store/limits.js';
import { usageOf } from '../../store/usage.js';
import { gatedCli } from '../helpers/cli.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';
import { USAGE_ANSWER, USAGE_TOOL } from '../helpers/usage-agent.js';

// Each turn touches got-N in the group's folder; the first answer waits for the file `go`.
const AGENT = `n=0; while IFS= read -r line; do case "$line" in *'"turn"'*) n=$((n+1)); : > "got-$n"; while [ ! -e go ]; do sleep 0.02; done; for b in '${USAGE_TOOL}' '${USAGE_ANSWER}'; do printf '%s\\n' '---GATED_OUTPUT_START---' "$b" '---GATED_OUTPUT_END---'; done;; esac; done`;

async function startPaused(idleMs = 60_000) {
  const g = await startTestGated({
    channels: [],
    http: false,
    env: { GATED_IDLE_TIMEOUT_MS: String(idleMs), GATED_AGENT_CMD: AGENT },
  });
  const { db } = g;
  addGroup(db, g.config.groupsDir, 'club');
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'club')`).run();
  usageOf(db).setPrice('m-test', 3, 15);
  setSenderLimits(db, 'club', 'telegram:ada', { runsPerDay: null, costPerDayUsd: 0.02, tokensPerDay: null });
  const dir = groupDirOf(g.config.groupsDir, 'club');
  const state = (id: number) => db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id);
  const answers = (id: number) =>
    db.prepare('SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ?').pluck().all(id);
  const send = (content: string) => g.gateway.sink({ chat_jid: 'telegram:-1', sender: 'ada', content })!;

  const one = send('one');
  await until(() => existsSync(join(dir, 'got-1')), 15_000, 'the first turn at the agent');
  const two = send('two');
  // Taken while ada is under her cap: it waits for the run's next turn.
  await until(() => state(two) === 'ready', 15_000, 'the second message waiting for the next turn');
  writeFileSync(join(dir, 'go'), '');
  const question = await until(
    () =>
      db.prepare(`SELECT * FROM tool_approvals WHERE tool = 'gated:budget' AND state = 'pending'`).get() as
        { id: number; code: string; input_line: string; run_id: number } | undefined,
    15_000,
    'the budget question',
  );
  await until(() => answers(one).length === 1, 15_000, 'the first answer');
  return { g, db, dir, one, two, question, state, answers };
}

test('a run over a cap after a turn pauses before its next turn, asks, and goes on when approved', async () => {
  const { g, db, dir, one, two, question, state, answers } = await startPaused();
  expect(question.input_line).toBe(
    'telegram:ada in club reached the daily agent cost cap ($0.0330 of $0.02)',
  );
  // Paused: the second message was not fed, and no second turn reached the agent.
  expect(state(two)).toBe('ready');
  expect(existsSync(join(dir, 'got-2'))).toBe(false);
  expect(
    db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND content LIKE '%over a daily cap%'`)
      .pluck()
      .all(),
  ).toEqual([expect.stringContaining(`/approve ${question.code} for one more budget`)]);

  const ok = await gatedCli(g.config.db, 'approvals', 'approve', question.code);
  expect(ok.code, ok.err).toBe(0);
  await until(() => answers(two).length === 1, 15_000, 'the second answer');
  expect(existsSync(join(dir, 'got-2'))).toBe(true);
  expect(answers(one)).toEqual(['priced']);
  expect(answers(two)).toEqual(['priced']);
  expect(db.prepare('SELECT sender, kind, amount, approval_id FROM budget_grants').all()).toEqual([
    { sender: 'telegram:ada', kind: 'cost', amount: 0.02, approval_id: question.id },
  ]);
  expect(db.prepare(`SELECT state, decided_by FROM tool_approvals`).all()).toEqual([
    { state: 'approved', decided_by: 'cli:root' },
  ]);
  expect(
    db.prepare('SELECT count(DISTINCT run_id) FROM messages WHERE id IN (?, ?)').pluck().get(one, two),
  ).toBe(1);
}, 60_000);

test('a run over a cap after a turn, rejected: stopped before its next turn, the waiting message held, never answered', async () => {
  const { g, db, dir, one, two, question, state, answers } = await startPaused();
  const no = await gatedCli(g.config.db, 'approvals', 'reject', question.code, '--note', 'enough');
  expect(no.code, no.err).toBe(0);
  await until(() => state(two) === 'limited', 15_000, 'the waiting message held');
  await until(
    () => db.prepare('SELECT ended_at FROM session_log WHERE id = ?').pluck().get(question.run_id),
    15_000,
    'the run closed',
  );
  expect(existsSync(join(dir, 'got-2'))).toBe(false);
  expect(answers(one)).toEqual(['priced']);
  // Never answered by the agent; the chat is told once why, and that the message is kept.
  expect(answers(two)).toEqual([]);
  const told = db
    .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND content LIKE 'Not answered:%'`)
    .pluck()
    .all();
  expect(told).toEqual([
    'Not answered: telegram:ada in club reached the daily agent cost cap ($0.0330 of $0.02); cli:root said stop (enough). 1 message is kept for an operator to release.',
  ]);
  expect(db.prepare('SELECT count(*) FROM budget_grants').pluck().get()).toBe(0);
  expect(db.prepare(`SELECT state, decided_by FROM tool_approvals`).all()).toEqual([
    { state: 'rejected', decided_by: 'cli:root' },
  ]);
}, 60_000);

test('an idle run whose next turn waits on a budget question outlives its idle timeout until decided', async () => {
  const { g, db, two, question, answers } = await startPaused(150);
  // Several idle timeouts pass while the question waits: the run stays, the question stays open.
  await new Promise((r) => setTimeout(r, 750));
  expect(db.prepare('SELECT ended_at FROM session_log WHERE id = ?').pluck().get(question.run_id)).toBeNull();
  expect(db.prepare('SELECT state FROM tool_approvals WHERE id = ?').pluck().get(question.id)).toBe(
    'pending',
  );
  const ok = await gatedCli(g.config.db, 'approvals', 'approve', question.code);
  expect(ok.code, ok.err).toBe(0);
  await until(() => answers(two).length === 1, 15_000, 'the second answer');
  expect(answers(two)).toEqual(['priced']);
  // Decided, the run idles out as any.
  await until(
    () => db.prepare('SELECT ended_at FROM session_log WHERE id = ?').pluck().get(question.run_id),
    15_000,
    'the run closed by its idle timeout',
  );
}, 60_000);
