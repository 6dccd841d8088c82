import { expect, it, vi } from 'vitest';
import { BACKLOG_HOLD_MS, YIELD_GRACE_MS, YIELD_GRACE_RUN_MS } from '../../queue/scheduler.js';
import { freshDb } from '../helpers/db.js';
import { flush, handQueue, ready, useQueueClock } from './helpers.js';

const queues = useQueueClock();

/** A row another process stored that the poll loop has not placed yet (after its cursor, no state). */
function unplaced(db: ReturnType<typeof freshDb>['db'], chat: string): void {
  db.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES (?, 'u', 'not placed yet')`).run(chat);
}

function setup() {
  const { db } = freshDb();
  const h = handQueue(db, { maxConcurrent: 1, idleTimeoutMs: 3_600_000 });
  queues.push(h.queue);
  return { db, ...h };
}

it('starts no run while the poll loop is behind, then one run for the whole batch at the hold’s end', async () => {
  const { db, queue, runtime, signals } = setup();
  signals.backlog.fire(true);
  const a = ready(db, { chat: 'tg:1', group: 'g1', content: 'a' });
  queue.wake();
  await flush();
  // The loop's next slice places another row of the same session.
  await vi.advanceTimersByTimeAsync(10);
  const b = ready(db, { chat: 'tg:1', group: 'g1', content: 'b' });
  queue.wake();
  await flush();
  await vi.advanceTimersByTimeAsync(BACKLOG_HOLD_MS - 11);
  await flush();
  expect(runtime.agents).toHaveLength(0);
  // No wake needed: the hold's own timer pumps at its end.
  await vi.advanceTimersByTimeAsync(1);
  await flush();
  expect(runtime.agents).toHaveLength(1);
  expect(runtime.agents[0]!.inputs()[0]!.messages.map((m) => m.id)).toEqual([a, b]);
  expect(db.prepare('SELECT count(*) FROM session_log').pluck().get()).toBe(1);
});

it('feeds a live run during a hold and keeps an idle agent’s slot while the loop is behind', async () => {
  const { db, queue, runtime, signals } = setup();
  const a = ready(db, { chat: 'tg:1', group: 'g1', content: 'a' });
  queue.wake();
  await flush();
  // Not behind: the run starts at once.
  expect(runtime.agents).toHaveLength(1);
  const agent = runtime.agents[0]!;
  agent.reply('one');
  await flush();

  signals.backlog.fire(true);
  const c = ready(db, { chat: 'tg:1', group: 'g1', content: 'c' });
  ready(db, { chat: 'tg:2', group: 'g2', content: 'other group' });
  queue.wake();
  await flush();
  expect(agent.inputs().map((i) => i.messages.map((m) => m.id))).toEqual([[a], [c]]);
  agent.reply('two');
  await flush();
  // Idle, and another group waits: without the hold it would give its slot up now.
  expect(agent.stdinClosed).toBe(false);

  // Caught up, and nothing waits after the cursor: no more rows of its session are coming, it yields at
  // once although it answered just now.
  signals.backlog.fire(false);
  await flush();
  expect(agent.stdinClosed).toBe(true);
  agent.finish();
  await flush();
  expect(runtime.agents.map((x) => x.spec.group)).toEqual(['g1', 'g2']);
});

it('during a burst, an agent that has just answered keeps its slot a moment before it yields', async () => {
  const { db, queue, runtime, signals } = setup();
  ready(db, { chat: 'tg:1', group: 'g1', content: 'a' });
  queue.wake();
  await flush();
  const agent = runtime.agents[0]!;
  // The loop was behind a moment ago and has caught up, and more rows came since that it has not read.
  signals.backlog.fire(true);
  signals.backlog.fire(false);
  unplaced(db, 'tg:1');
  ready(db, { chat: 'tg:2', group: 'g2', content: 'waits' });
  queue.wake();
  await flush();
  agent.reply('done');
  await flush();
  // Its session's next rows may be among them: it is not asked to yield yet.
  expect(agent.stdinClosed).toBe(false);
  await vi.advanceTimersByTimeAsync(YIELD_GRACE_MS - 1);
  await flush();
  expect(agent.stdinClosed).toBe(false);
  // The grace's own timer pumps at its end.
  await vi.advanceTimersByTimeAsync(1);
  await flush();
  expect(agent.stdinClosed).toBe(true);
  agent.finish();
  await flush();
  expect(runtime.agents.map((a) => a.spec.group)).toEqual(['g1', 'g2']);
});

it('a session whose rows keep coming keeps the grace for the first part of its run only', async () => {
  const { db, queue, runtime, signals } = setup();
  ready(db, { chat: 'tg:1', group: 'g1', content: 'a' });
  queue.wake();
  await flush();
  const agent = runtime.agents[0]!;
  ready(db, { chat: 'tg:2', group: 'g2', content: 'waits' });
  // A burst: the loop keeps falling behind and catching up with rows always waiting after its cursor, and
  // g1's rows come every 60 ms, each answered at once, so that its agent is always within the grace of its
  // last answer.
  unplaced(db, 'tg:3');
  let elapsed = 0;
  let answered = 0;
  while (!agent.stdinClosed && elapsed < 2_000) {
    signals.backlog.fire(true);
    signals.backlog.fire(false);
    await flush();
    if (agent.inputs().length > answered) {
      agent.reply(`answer ${++answered}`);
      await flush();
    }
    if (agent.stdinClosed) break;
    await vi.advanceTimersByTimeAsync(60);
    elapsed += 60;
    ready(db, { chat: 'tg:1', group: 'g1', content: `more ${elapsed}` });
    queue.wake();
    await flush();
  }
  // Fed and kept through its first YIELD_GRACE_RUN_MS, then it yields at its next idle moment.
  expect(answered).toBeGreaterThanOrEqual(Math.floor(YIELD_GRACE_RUN_MS / 60));
  expect(agent.stdinClosed).toBe(true);
  expect(elapsed).toBeGreaterThanOrEqual(YIELD_GRACE_RUN_MS - 60);
  expect(elapsed).toBeLessThan(YIELD_GRACE_RUN_MS + 120);
  agent.finish();
  await flush();
  expect(runtime.agents.map((a) => a.spec.group)).toEqual(['g1', 'g2']);
});

it('a small burst: once nothing waits to be placed, an agent that has just answered yields at once', async () => {
  const { db, queue, runtime, signals } = setup();
  ready(db, { chat: 'tg:1', group: 'g1', content: 'a' });
  queue.wake();
  await flush();
  const agent = runtime.agents[0]!;
  // The loop was behind a moment ago (a second's grace before) and has caught up: every row is placed.
  signals.backlog.fire(true);
  signals.backlog.fire(false);
  ready(db, { chat: 'tg:2', group: 'g2', content: 'waits' });
  queue.wake();
  await flush();
  agent.reply('done');
  await flush();
  expect(agent.stdinClosed).toBe(true);
  agent.finish();
  await flush();
  expect(runtime.agents.map((a) => a.spec.group)).toEqual(['g1', 'g2']);
});
