/**
 * Two chats routed to one session key (docs/QUEUE.md, "Another chat of the same key"): a run serves one chat, so a message of
 * another chat is never left waiting for the idle timeout: the run's agent is closed as soon as it has
 * answered what it has, and a newer message of the run's own chat does not overtake the waiting chat.
 * A real SQLite file; the agents are HandAgents the test drives line by line.
 */
import { afterEach, expect, it } from 'vitest';
import type { WorkQueue } from '../../queue/types.js';
import { freshDb } from '../helpers/db.js';
import { flush, handQueue, ready, states } from './helpers.js';

const queues: WorkQueue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) await q.close(0);
});

function setup() {
  const { db } = freshDb();
  // An idle timeout far longer than the test: only the other chat can end the run early.
  const h = handQueue(db, { idleTimeoutMs: 3_600_000 });
  queues.push(h.queue);
  return { db, ...h };
}

it('an idle run is closed at once for another chat; the next run serves that chat', async () => {
  const { db, queue, runtime } = setup();
  const a = ready(db, { chat: 'tg:A', content: 'from A' });
  queue.wake();
  await flush();
  const first = runtime.agents[0]!;
  first.reply('answer A', { turn: 1 });
  await flush();
  expect(first.stdinClosed).toBe(false);

  const b = ready(db, { chat: 'tg:B', content: 'from B' });
  queue.wake();
  await flush();
  expect(first.stdinClosed).toBe(true);
  first.finish();
  await flush();
  expect(runtime.agents).toHaveLength(2);
  expect(runtime.agents[1]!.inputs()[0]).toMatchObject({ chatJid: 'tg:B' });
  expect(states(db, [a, b])).toEqual(['done', 'running']);
  expect(db.prepare(`SELECT result FROM session_log ORDER BY id LIMIT 1`).pluck().get()).toBe('ok');
});

it("a busy run finishes its turn, then is closed; its chat's newer message does not overtake the waiting chat", async () => {
  const { db, queue, runtime } = setup();
  const a1 = ready(db, { chat: 'tg:A', content: 'A one' });
  queue.wake();
  await flush();
  const first = runtime.agents[0]!;
  // A draft numbered with its turn: this agent may be given lines while it works.
  first.reply('drafting', { turn: 1, partial: true });
  await flush();
  const b1 = ready(db, { chat: 'tg:B', content: 'B one' });
  const a2 = ready(db, { chat: 'tg:A', content: 'A two' });
  queue.wake();
  await flush();
  // Busy: not closed yet; A's newer message is not written to it (B waits longer).
  expect(first.stdinClosed).toBe(false);
  expect(first.inputs()).toHaveLength(1);

  first.reply('answer A one', { turn: 1 });
  await flush();
  expect(first.stdinClosed).toBe(true);
  expect(first.inputs()).toHaveLength(1);
  first.finish();
  await flush();
  expect(runtime.agents[1]!.inputs()[0]!.messages.map((m) => m.id)).toEqual([b1]);
  expect(states(db, [a1, b1, a2])).toEqual(['done', 'running', 'ready']);

  // And back: B's run, once it has answered, yields to A's waiting message the same way.
  runtime.agents[1]!.reply('answer B', { turn: 1 });
  await flush();
  expect(runtime.agents[1]!.stdinClosed).toBe(true);
  runtime.agents[1]!.finish();
  await flush();
  expect(runtime.agents[2]!.inputs()[0]!.messages.map((m) => m.id)).toEqual([a2]);
});
