/**
 * The settlement of turns, block by block, with a hand-driven agent (the timing-free cases: which rows a
 * block marks, and what each way of ending a run does to open turns). The same mechanics with real, slow
 * agents are in turns-agents.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { freshDb } from '../helpers/db.js';
import type { Db } from '../../store/db.js';
import type { WorkQueue } from '../../queue/types.js';
import { flush, handQueue, ready, states, type HandAgent } from './helpers.js';

const queues: WorkQueue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) await q.close(0);
});

function setup() {
  const fresh = freshDb();
  const h = handQueue(fresh.db);
  queues.push(h.queue);
  return { ...fresh, ...h };
}

const turnOf = (db: Db, id: number) => db.prepare('SELECT turn FROM messages WHERE id = ?').pluck().get(id);
const replyCount = (db: Db) => db.prepare('SELECT count(*) FROM messages WHERE is_from_me = 1').pluck().get();
const attempts = (db: Db, id: number) =>
  db.prepare('SELECT attempts FROM messages WHERE id = ?').pluck().get(id);

/** One run of chat tg:A with turns 1..n written (the agent numbers its blocks: a draft says so). */
async function threeTurns(h: ReturnType<typeof setup>) {
  const ids = [ready(h.db, { chat: 'tg:A', content: 'one' })];
  h.queue.wake();
  await flush();
  const agent = h.runtime.agents[0]!;
  agent.reply('thinking', { turn: 1, partial: true });
  await flush();
  for (const content of ['two', 'three']) {
    ids.push(ready(h.db, { chat: 'tg:A', content }));
    h.queue.wake();
    await flush();
  }
  return { agent, ids };
}

describe('turns: which rows a block answers', () => {
  it('numbers every line and marks only the turns a block names, up to and including it', async () => {
    const h = setup();
    const { agent, ids } = await threeTurns(h);
    expect(agent.inputs().map((l) => l.turn)).toEqual([1, 2, 3]);
    expect(ids.map((id) => turnOf(h.db, id))).toEqual([1, 2, 3]);
    expect(states(h.db, ids)).toEqual(['running', 'running', 'running']);

    agent.reply('for one', { turn: 1 });
    await flush();
    expect(states(h.db, ids)).toEqual(['done', 'running', 'running']);
    agent.reply('for two and three', { turn: 3 });
    await flush();
    expect(states(h.db, ids)).toEqual(['done', 'done', 'done']);
    expect(replyCount(h.db)).toBe(2);
    const replyTo = h.db
      .prepare('SELECT reply_to_id FROM messages WHERE is_from_me = 1 ORDER BY id')
      .pluck()
      .all();
    expect(replyTo).toEqual([ids[0], ids[2]]);
  });

  it('credits a block without a turn to the oldest open turn only', async () => {
    const h = setup();
    const { agent, ids } = await threeTurns(h);
    agent.reply('unnumbered');
    await flush();
    expect(states(h.db, ids)).toEqual(['done', 'running', 'running']);
    agent.reply('unnumbered again');
    await flush();
    expect(states(h.db, ids)).toEqual(['done', 'done', 'running']);
  });

  it('never stores a partial block, and stores a block that answers no open turn as a reply', async () => {
    const h = setup();
    const { agent, ids } = await threeTurns(h);
    agent.reply('draft text', { turn: 2, partial: true });
    await flush();
    expect(replyCount(h.db)).toBe(0);
    expect(states(h.db, ids)).toEqual(['running', 'running', 'running']);
    agent.reply('all', { turn: 9 });
    agent.reply('an afterthought', { turn: 2 });
    await flush();
    expect(states(h.db, ids)).toEqual(['done', 'done', 'done']);
    expect(replyCount(h.db)).toBe(2);
  });
});

describe('turns: how a run ends', () => {
  async function answeredOne(): Promise<{ h: ReturnType<typeof setup>; agent: HandAgent; ids: number[] }> {
    const h = setup();
    const { agent, ids } = await threeTurns(h);
    agent.reply('for one', { turn: 1 });
    await flush();
    return { h, agent, ids };
  }

  it('exit 1 after turn 1: turns 2–3 go back to ready as they were, turn 1 is not answered again', async () => {
    const { h, agent, ids } = await answeredOne();
    agent.finish({ code: 1 });
    await flush();
    expect(h.runtime.agents).toHaveLength(2);
    const next = h.runtime.agents[1]!.inputs()[0]!;
    expect(next.messages.map((m) => m.id)).toEqual([ids[1], ids[2]]);
    expect(next.turn).toBe(1);
    expect([attempts(h.db, ids[1]!), turnOf(h.db, ids[1]!)]).toEqual([0, 1]);
    expect(replyCount(h.db)).toBe(1);
  });

  it('exit 1 before answering anything is a failure: attempts + 1, backoff', async () => {
    const h = setup();
    const id = ready(h.db, { chat: 'tg:A' });
    h.queue.wake();
    await flush();
    h.runtime.agents[0]!.reply('draft only', { partial: true });
    h.runtime.agents[0]!.finish({ code: 1 });
    await flush();
    expect(states(h.db, [id])).toEqual(['ready']);
    expect(attempts(h.db, id)).toBe(1);
    expect(h.runtime.agents).toHaveLength(1);
  });

  it('a clean exit with stdin open gives open turns to a new run; /stop stops only open turns', async () => {
    const { h, agent, ids } = await answeredOne();
    agent.finish({ code: 0 });
    await flush();
    expect(states(h.db, ids)).toEqual(['done', 'running', 'running']);
    expect(h.runtime.agents[1]!.inputs()[0]!.messages.map((m) => m.id)).toEqual([ids[1], ids[2]]);

    h.runtime.agents[1]!.reply('two', { turn: 1, partial: true });
    const four = ready(h.db, { chat: 'tg:A', content: 'four' });
    h.queue.wake();
    await flush();
    h.runtime.agents[1]!.reply('two and three', { turn: 1 });
    await flush();
    expect(await h.queue.stop({ group: 'g1', topic: '' }, 'tg:A')).toBe(true);
    expect(states(h.db, [...ids, four])).toEqual(['done', 'done', 'done', 'stopped']);
  });

  it('gated dying mid-run: recovery gives back only the unanswered turns', async () => {
    const { h, ids } = await answeredOne();
    // A new process opens the same file; the old one never settles.
    const db2 = h.reopen();
    const again = handQueue(db2);
    queues.push(again.queue);
    again.queue.recover();
    await flush();
    expect(states(db2, ids)).toEqual(['done', 'running', 'running']);
    expect(again.runtime.agents[0]!.inputs()[0]!.messages.map((m) => m.id)).toEqual([ids[1], ids[2]]);
  });
});

describe("turns: a run's time, work and idle", () => {
  it('idle is the time with every turn answered (between turns and after the last, to the end); the rest is work', async () => {
    const t0 = Date.now();
    let t = t0;
    const { db } = freshDb();
    const h = { db, ...handQueue(db, { now: () => t }) };
    queues.push(h.queue);
    ready(h.db, { chat: 'tg:A', content: 'one' });
    h.queue.wake();
    await flush();
    const agent = h.runtime.agents[0]!;
    t = t0 + 100;
    agent.reply('for one', { turn: 1 }); // idle from 100 ms
    await flush();
    t = t0 + 400;
    ready(h.db, { chat: 'tg:A', content: 'two' }); // turn 2 written: 300 ms idle so far
    h.queue.wake();
    await flush();
    expect(agent.inputs().map((l) => l.turn)).toEqual([1, 2]);
    t = t0 + 600;
    agent.reply('for two', { turn: 2 }); // idle again from 600 ms
    await flush();
    t = t0 + 1000;
    agent.finish({ code: 0 }); // the end: 400 ms more
    await flush();
    const run = h.db.prepare('SELECT started_at, ended_at, result, idle_ms FROM session_log').get();
    expect(run).toEqual({
      started_at: new Date(t0).toISOString(),
      ended_at: new Date(t0 + 1000).toISOString(),
      result: 'ok',
      idle_ms: 700,
    });
  });
});
