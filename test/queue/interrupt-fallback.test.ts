/**
 * The interrupt fallback (docs/PROTOCOL.md): an agent that does not answer an interrupt within the grace is
 * treated, for that turn, as if its group were in `queue` mode. The agent here is the real turn agent
 * (test/queue/agents/turn-agent.mjs) under the process runtime, which reads interrupt lines and ignores
 * them, as an agent without interrupt support would; the database is a real SQLite file.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, expect, it } from 'vitest';
import { loadConfig } from '../../core/config.js';
import { packageFile } from '../../core/paths.js';
import { createQueue } from '../../queue/queue.js';
import { INTERRUPT_GRACE_MS } from '../../queue/interrupts.js';
import { createProcessRuntime } from '../../queue/runtime/process.js';
import type { WorkQueue } from '../../queue/types.js';
import type { Db } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { recordingSignals } from '../helpers/signals.js';
import { ready } from './helpers.js';

const AGENT = packageFile('test', 'queue', 'agents', 'turn-agent.mjs');
/** Shorter than the 10 s default so the test stays quick; the behaviour past it is the same. */
const GRACE_MS = 1500;

const queues: WorkQueue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) await q.close(2000);
});

interface AgentEvent {
  ev: string;
  turn?: number;
  ids?: number[];
  t: number;
}

function agentLog(dir: string): AgentEvent[] {
  const file = join(dir, 'agent-log.jsonl');
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as AgentEvent);
}

/** A queue running the turn agent for group g1 in `interrupt` mode; its warnings are collected. */
function interruptQueue(db: Db) {
  const groups = tempDir('gated-fallback-');
  const dir = join(groups, 'g1');
  mkdirSync(dir);
  addGroup(db, groups, 'g1');
  db.prepare(`UPDATE registered_groups SET busy = 'interrupt' WHERE folder = 'g1'`).run();
  const lines: Array<{ msg: string; turn?: number; graceMs?: number }> = [];
  const log = pino({ level: 'warn' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  const { signals, partials } = recordingSignals();
  const queue = createQueue({
    db,
    runtime: createProcessRuntime({ cmd: `TURN_MS=200 DRAFT=1 exec node "${AGENT}"` }),
    config: loadConfig({ GATED_GROUPS_DIR: groups, GATED_IDLE_TIMEOUT_MS: '30000' }),
    log,
    signals,
    interruptGraceMs: GRACE_MS,
  });
  queues.push(queue);
  return { queue, dir, warnings: lines, partials };
}

const rowOf = (db: Db, id: number) =>
  db.prepare('SELECT state, run_id, turn FROM messages WHERE id = ?').get(id) as {
    state: string;
    run_id: number;
    turn: number;
  };

const repliesTo = (db: Db, id: number) =>
  db
    .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND reply_to_id = ? ORDER BY id`)
    .pluck()
    .all(id) as string[];

it('the default grace is the contract’s 10 s', () => {
  expect(INTERRUPT_GRACE_MS).toBe(10_000);
});

it('an agent that ignores the interrupt: its turn is waited for as queued, each message answered once, in order', async () => {
  const { db } = freshDb();
  const { queue, dir, warnings, partials } = interruptQueue(db);
  // Turn 1 thinks well past the grace; the agent's draft tells gated it numbers its turns.
  const slowMs = GRACE_MS + 2500;
  const m1 = ready(db, { chat: 'tg:A', content: `long #slow=${slowMs}` });
  queue.wake();
  await until(() => partials.length > 0, 10_000, 'the draft of turn 1');
  const m2 = ready(db, { chat: 'tg:A', content: 'changed my mind' });
  queue.wake();
  await until(() => rowOf(db, m2).turn === 2, 10_000, 'turn 2 written');
  // The interrupt line was written first and read by the agent, which did nothing with it.
  const interruptRead = await until(
    () => agentLog(dir).find((e) => e.ev === 'interrupt'),
    5000,
    'the interrupt line read',
  );
  expect(interruptRead.turn).toBe(1);

  // Past the grace: logged, nothing killed, turn 1 still open and waited for.
  await until(() => warnings.some((w) => /did not answer an interrupt/.test(w.msg)), 10_000, 'the fallback');
  expect(warnings.find((w) => /did not answer an interrupt/.test(w.msg))).toMatchObject({
    turn: 1,
    graceMs: GRACE_MS,
  });
  expect(rowOf(db, m1).state).toBe('running');
  // A message arriving now, while turn 1 is waited for, is queued without another interrupt.
  const m3 = ready(db, { chat: 'tg:A', content: 'and this too' });
  queue.wake();
  await until(() => rowOf(db, m3).turn === 3, 10_000, 'turn 3 written');

  await until(() => rowOf(db, m3).state === 'done', 20_000, 'every turn answered');
  expect(repliesTo(db, m1)).toEqual([`echo: long #slow=${slowMs}`]);
  expect(repliesTo(db, m2)).toEqual(['echo: changed my mind']);
  expect(repliesTo(db, m3)).toEqual(['echo: and this too']);
  const runId = rowOf(db, m1).run_id;
  expect([rowOf(db, m2).run_id, rowOf(db, m3).run_id]).toEqual([runId, runId]);
  // Turn 1 ran its whole time (not cut short), and one interrupt line was written in all.
  const events = agentLog(dir);
  const line1 = events.find((e) => e.ev === 'line' && e.turn === 1)!;
  const answer1 = events.find((e) => e.ev === 'answer' && e.turn === 1)!;
  expect(answer1.t - line1.t).toBeGreaterThanOrEqual(slowMs - 50);
  expect(events.filter((e) => e.ev === 'interrupt')).toHaveLength(1);
  expect(events.filter((e) => e.ev === 'answer').map((e) => e.turn)).toEqual([1, 2, 3]);
}, 40_000);

it('once the waited-for turn is answered, interrupts resume for the next turn', async () => {
  const { db } = freshDb();
  const { queue, dir, warnings, partials } = interruptQueue(db);
  const m1 = ready(db, { chat: 'tg:A', content: `long #slow=${GRACE_MS + 1000}` });
  queue.wake();
  await until(() => partials.length > 0, 10_000, 'the draft of turn 1');
  // Turn 2 is slow too: the message after turn 1's answer interrupts it.
  const m2 = ready(db, { chat: 'tg:A', content: `second #slow=${GRACE_MS + 1000}` });
  queue.wake();
  await until(() => warnings.length > 0, 10_000, 'the fallback of turn 1');
  await until(() => rowOf(db, m1).state === 'done', 10_000, 'turn 1 answered');
  await until(() => partials.some((p) => p.turn === 2), 10_000, 'turn 2 drafting');
  const m3 = ready(db, { chat: 'tg:A', content: 'third' });
  queue.wake();
  await until(() => rowOf(db, m3).state === 'done', 20_000, 'turn 3 answered');
  const interrupts = agentLog(dir).filter((e) => e.ev === 'interrupt');
  expect(interrupts.map((e) => e.turn)).toEqual([1, 2]);
  for (const id of [m1, m2, m3]) expect(repliesTo(db, id)).toHaveLength(1);
}, 40_000);
