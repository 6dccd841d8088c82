/**
 * The idle budget (GATED_IDLE_AGENTS_MAX): each idle agent holds its memory until its idle timeout, so
 * beyond the budget the longest idle ones are closed first; agents at work are not counted.
 */
import { expect, it, vi } from 'vitest';
import { freshDb } from '../helpers/db.js';
import { flush, handQueue, ready, type HandAgent, useQueueClock } from './helpers.js';

const queues = useQueueClock();

/** Three groups with a run each, agents started in order g1, g2, g3; a long idle timeout. */
async function threeRuns(idleAgentsMax: number | null) {
  const { db } = freshDb();
  const h = handQueue(db, { idleTimeoutMs: 60_000, runTimeoutMs: 3_600_000, idleAgentsMax });
  queues.push(h.queue);
  for (const group of ['g1', 'g2', 'g3']) ready(db, { chat: `tg:${group}`, group });
  h.queue.wake();
  await flush();
  expect(h.runtime.agents.map((a) => a.spec.group)).toEqual(['g1', 'g2', 'g3']);
  const [a1, a2, a3] = [0, 1, 2].map((i) => h.runtime.agents[i]!) as [HandAgent, HandAgent, HandAgent];
  /** The agent answers its turn (and so becomes idle) a second after the previous one. */
  const answer = async (a: HandAgent) => {
    await vi.advanceTimersByTimeAsync(1000);
    a.reply('done');
    await flush();
  };
  return { db, ...h, a1, a2, a3, answer };
}

it('closes the longest idle agents beyond the budget, and leaves agents at work alone', async () => {
  const { db, a1, a2, a3, answer } = await threeRuns(1);
  // Two at work, one idle: within the budget.
  await answer(a2);
  expect([a1, a2, a3].map((a) => a.stdinClosed)).toEqual([false, false, false]);
  // A second idle agent: the one idle longest (g2) is closed, the newest idle stays.
  await answer(a1);
  expect([a1, a2, a3].map((a) => a.stdinClosed)).toEqual([false, true, false]);
  // The closed agent exits: its run ended well, its row answered.
  a2.finish({ code: 0 });
  await flush();
  expect(db.prepare(`SELECT result FROM session_log WHERE group_folder = 'g2'`).pluck().get()).toBe('ok');
  expect(db.prepare(`SELECT state FROM messages WHERE group_folder = 'g2'`).pluck().get()).toBe('done');
  await answer(a3);
  expect([a1, a3].map((a) => a.stdinClosed)).toEqual([true, false]);
});

it('a budget of 0 closes each agent as soon as it has answered', async () => {
  const { a1, a2, a3, answer } = await threeRuns(0);
  await answer(a3);
  expect([a1, a2, a3].map((a) => a.stdinClosed)).toEqual([false, false, true]);
});

it('without a budget every idle agent waits out its idle timeout', async () => {
  const { a1, a2, a3, answer } = await threeRuns(null);
  for (const a of [a1, a2, a3]) await answer(a);
  await vi.advanceTimersByTimeAsync(50_000);
  expect([a1, a2, a3].map((a) => a.stdinClosed)).toEqual([false, false, false]);
  await vi.advanceTimersByTimeAsync(10_000);
  expect([a1, a2, a3].map((a) => a.stdinClosed)).toEqual([true, true, true]);
});
