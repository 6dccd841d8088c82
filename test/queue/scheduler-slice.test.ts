import { setImmediate } from 'node:timers';
import { afterEach, expect, it } from 'vitest';
import type { WorkQueue } from '../../queue/types.js';
import { joinGroup, startGroupCommit } from '../../store/group-commit.js';
import { countSql } from '../../bench/sql-count.js';
import { freshDb } from '../helpers/db.js';
import { flush, handQueue, ready } from './helpers.js';

// Real timers: the pump's slice is measured on the real clock.
const queues: WorkQueue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) await q.close(0);
});

it('starts runs for about a slice per pump and the rest after the event loop had its turn', async () => {
  const { db } = freshDb();
  // Each run's start takes 10 ms of the event loop here (its first input line is built synchronously).
  const slow = () => {
    const until = performance.now() + 10;
    while (performance.now() < until);
    return [];
  };
  const h = handQueue(db, { maxConcurrent: 5, capabilities: slow });
  queues.push(h.queue);
  for (let g = 1; g <= 5; g++) ready(db, { chat: `tg:${g}`, group: `g${g}` });
  const runs = () => db.prepare('SELECT count(*) FROM session_log').pluck().get() as number;
  const seen: number[] = [];
  h.queue.wake();
  // Armed before the pump runs: the event loop's next check phase sees how many runs had started.
  setImmediate(() => seen.push(runs()));
  await flush(20);
  // One start per pump (each is over the slice), other work between pumps, and in the end all five.
  expect(seen).toEqual([1]);
  expect(runs()).toBe(5);
  expect(h.runtime.agents.map((a) => a.spec.group).sort()).toEqual(['g1', 'g2', 'g3', 'g4', 'g5']);
});

it("counts the turn's earlier work against the slice: a pump in a spent turn leaves its runs to the next", async () => {
  const { db } = freshDb();
  const failures: Error[] = [];
  startGroupCommit(db, { onFailed: (err) => failures.push(err) });
  const h = handQueue(db, { maxConcurrent: 5 });
  queues.push(h.queue);
  for (let g = 1; g <= 3; g++) ready(db, { chat: `tg:${g}`, group: `g${g}` });
  const runs = () => db.prepare('SELECT count(*) FROM session_log').pluck().get() as number;
  await flush(2);
  // This turn wrote (its group is open) and then worked for more than a slice before the pump.
  joinGroup(db);
  const until = performance.now() + 12;
  while (performance.now() < until);
  const seen: number[] = [];
  h.queue.wake();
  setImmediate(() => seen.push(runs()));
  await flush(20);
  // Nothing started in the spent turn; the next turn's pump started all three (its slice was free).
  expect(seen).toEqual([0]);
  expect(runs()).toBe(3);
  expect(failures).toEqual([]);
});

it('reads only the lanes a pump starts: 100 waiting groups, a pump over its slice after one start', async () => {
  const { db } = freshDb();
  const slow = () => {
    const until = performance.now() + 10;
    while (performance.now() < until);
    return [];
  };
  const h = handQueue(db, { maxConcurrent: 101, capabilities: slow });
  queues.push(h.queue);
  for (let g = 1; g <= 100; g++) ready(db, { chat: `tg:${g}`, group: `g${g}` });
  const runs = () => db.prepare('SELECT count(*) FROM session_log').pluck().get() as number;
  const sql = countSql();
  const reads: number[] = [];
  const laneReads = () =>
    sql
      .top(1000)
      .filter((s) => s.sql.startsWith('SELECT group_folder AS "group"'))
      .reduce((n, s) => n + s.calls, 0);
  try {
    h.queue.wake();
    setImmediate(() => reads.push(runs(), laneReads()));
    await flush(20);
    while (runs() < 100) await flush(5);
  } finally {
    sql.stop();
  }
  // The first pump started one run and read two lanes (the one it started, one to know more wait), not
  // the 100 (it read them all, and again at every pump: 100 pumps reading 100 lanes each).
  expect(reads).toEqual([1, 2]);
  expect(runs()).toBe(100);
});

it('feeds only the lane of an agent that became idle; a wake for new rows feeds them all', async () => {
  const { db } = freshDb();
  const h = handQueue(db, { maxConcurrent: 20 });
  queues.push(h.queue);
  for (let g = 1; g <= 20; g++) ready(db, { chat: `tg:${g}`, group: `g${g}` });
  h.queue.wake();
  await flush(20);
  expect(h.runtime.agents).toHaveLength(20);
  const sql = countSql();
  // Each fed lane asks once whether another chat waits for its key.
  const fed = () =>
    sql
      .top(1000)
      .filter((s) => s.sql.startsWith('SELECT min(id) FROM messages'))
      .reduce((n, s) => n + s.calls, 0);
  try {
    const agent = (g: string) => h.runtime.agents.find((a) => a.spec.group === g)!;
    agent('g1').reply('done');
    await flush(20);
    expect(fed()).toBe(1);
    agent('g2').reply('done');
    await flush(20);
    expect(fed()).toBe(2);
    // A new row may be any lane's: every lane is fed, and g2's idle agent gets it as its next turn.
    const id = ready(db, { chat: 'tg:2', group: 'g2' });
    h.queue.wake();
    await flush(20);
    expect(fed()).toBe(22);
    const second = agent('g2');
    expect(
      second
        .inputs()
        .at(-1)!
        .messages.map((m) => m.id),
    ).toEqual([id]);
  } finally {
    sql.stop();
  }
});

it('reads no waiting lane while every slot is taken by an agent at work, and one per idle agent', async () => {
  const { db } = freshDb();
  const h = handQueue(db, { maxConcurrent: 2 });
  queues.push(h.queue);
  for (let g = 1; g <= 6; g++) ready(db, { chat: `tg:${g}`, group: `g${g}` });
  h.queue.wake();
  await flush(20);
  expect(h.runtime.agents).toHaveLength(2);
  const sql = countSql();
  const laneReads = () =>
    sql
      .top(1000)
      .filter((s) => s.sql.startsWith('SELECT group_folder AS "group"'))
      .reduce((n, s) => n + s.calls, 0);
  try {
    // A new row while both agents work: nothing can yield, no waiting lane is read.
    ready(db, { chat: 'tg:7', group: 'g7' });
    h.queue.wake();
    await flush(20);
    expect(laneReads()).toBe(0);
    // One agent answers: one waiting lane read, and that agent gives its slot up.
    h.runtime.agents[0]!.reply('done');
    await flush(20);
    expect(laneReads()).toBe(1);
    expect(h.runtime.agents[0]!.stdinClosed).toBe(true);
  } finally {
    sql.stop();
  }
});
