import Database from 'better-sqlite3';
import { setTimeout as realTimeout } from 'node:timers/promises';
import { afterEach, expect, it } from 'vitest';
import { freshDb, throwingGroupCommit } from '../helpers/db.js';
import { flush, handQueue, ready, states } from './helpers.js';

// Real timers on purpose: the run's inbox tries again on node:timers, and the point is the event loop.
const open: Array<{ close(graceMs: number): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((q) => q.close(0)));
});

/**
 * The agent's events while another connection holds the write lock. That connection is in this very
 * thread: had the run slept in SQLite's busy handler for the lock, it would have slept the whole busy
 * timeout (30 s) and failed, since the holder could only let go once the event loop was free again.
 */
it("keeps an agent's blocks and its end while the write lock is held, and handles them in order after", async () => {
  const { db, path } = freshDb();
  throwingGroupCommit(db);
  const { queue, runtime, outbound } = handQueue(db, { maxConcurrent: 1, idleTimeoutMs: 3_600_000 });
  open.push(queue);
  const a = ready(db, { chat: 'tg:1', group: 'g1', content: 'a' });
  queue.wake();
  await flush();
  expect(runtime.agents).toHaveLength(1);
  const agent = runtime.agents[0]!;
  await realTimeout(5); // the dispatch's group commits

  const other = new Database(path);
  other.exec('BEGIN IMMEDIATE');
  const started = performance.now();
  agent.reply('first');
  agent.reply('second');
  agent.finish();
  // The event loop goes on: timers fire on time while the events wait.
  const ticks: number[] = [];
  for (let i = 0; i < 10; i++) {
    const t = performance.now();
    await realTimeout(10);
    ticks.push(performance.now() - t);
  }
  expect(performance.now() - started).toBeLessThan(2_000);
  expect(Math.max(...ticks)).toBeLessThan(500);
  // Nothing of the agent's output is stored yet: the row still runs and no reply exists.
  expect(states(db, [a])).toEqual(['running']);
  expect(db.prepare('SELECT count(*) FROM messages WHERE is_from_me = 1').pluck().get()).toBe(0);
  expect(db.prepare('SELECT result FROM session_log').pluck().get()).toBeNull();
  expect(outbound).toEqual([]);
  // Nor is more of its output read meanwhile: its pipe fills and the agent waits, as it would for gated.
  expect(agent.stdout.isPaused()).toBe(true);

  other.exec('COMMIT');
  other.close();
  for (let i = 0; i < 50 && db.prepare('SELECT result FROM session_log').pluck().get() === null; i++)
    await realTimeout(10);
  await flush();
  // Both blocks, in the order printed, then the end: the first answered the row, the run settled after.
  expect(states(db, [a])).toEqual(['done']);
  const replies = db.prepare('SELECT content FROM messages WHERE is_from_me = 1 ORDER BY id').pluck().all();
  expect(replies).toEqual(['first', 'second']);
  expect(outbound).toHaveLength(2);
  expect(db.prepare('SELECT result FROM session_log').pluck().get()).toBe('ok');
  expect(agent.stdout.isPaused()).toBe(false);
});

it('shows draft blocks while the write lock is held (they write nothing), keeping them after a kept event', async () => {
  const { db, path } = freshDb();
  throwingGroupCommit(db);
  const { queue, runtime, signals } = handQueue(db, { maxConcurrent: 1, idleTimeoutMs: 3_600_000 });
  open.push(queue);
  const a = ready(db, { chat: 'tg:1', group: 'g1', content: 'a' });
  queue.wake();
  await flush();
  const agent = runtime.agents[0]!;
  await realTimeout(5); // the dispatch's group commits
  const drafts: string[] = [];
  signals.partial.on((p) => drafts.push(p.text));

  const other = new Database(path);
  other.exec('BEGIN IMMEDIATE');
  agent.reply('draft one', { partial: true });
  for (let i = 0; i < 200 && drafts.length === 0; i++) await realTimeout(5);
  // Shown at once, the output still read: a draft needs no lock.
  expect(drafts).toEqual(['draft one']);
  expect(agent.stdout.isPaused()).toBe(false);
  // A block that writes waits for the lock; the draft after it waits behind it, in order.
  agent.reply('answer');
  agent.reply('draft two', { partial: true });
  await realTimeout(50);
  expect(drafts).toEqual(['draft one']);
  expect(states(db, [a])).toEqual(['running']);

  other.exec('COMMIT');
  other.close();
  for (let i = 0; i < 100 && drafts.length < 2; i++) await realTimeout(10);
  expect(drafts).toEqual(['draft one', 'draft two']);
  expect(states(db, [a])).toEqual(['done']);
});
