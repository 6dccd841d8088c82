import { sessionsOf } from '../../store/sessions.js';
import { afterEach, describe, expect, it } from 'vitest';
import { freshDb } from '../helpers/db.js';
import { flush, handQueue, ready, states } from './helpers.js';
import type { WorkQueue } from '../../queue/types.js';

const queues: WorkQueue[] = [];
afterEach(async () => {
  for (const q of queues.splice(0)) await q.close(0);
});

function setup(over: Parameters<typeof handQueue>[1] = {}) {
  const { db } = freshDb();
  const h = handQueue(db, over);
  queues.push(h.queue);
  return { db, ...h };
}

describe('queue: dispatch and input', () => {
  it('hands a run every ready row of the key and the oldest chat, oldest first, in one dispatch', async () => {
    const { db, queue, runtime } = setup({ secrets: { API_KEY: 'k-123' } });
    db.prepare(
      `INSERT INTO sessions (group_folder, topic, session_id) VALUES ('g1', 'support', 'sess-9')`,
    ).run();
    db.prepare(
      `INSERT INTO system_messages (group_folder, topic, content) VALUES ('g1', 'support', 'was reset')`,
    ).run();
    const a1 = ready(db, { chat: 'tg:A', topic: 'support', content: 'first <b>', msgId: 'p1' });
    const b1 = ready(db, { chat: 'tg:B', topic: 'support', content: 'other chat' });
    const a2 = ready(db, { chat: 'tg:A', topic: 'support', content: 'second' });
    queue.wake();
    queue.wake();
    await flush();

    expect(runtime.agents).toHaveLength(1);
    const agent = runtime.agents[0]!;
    expect(agent.spec).toMatchObject({ group: 'g1', topic: 'support', groupDir: '/nonexistent/groups/g1' });
    const [input] = agent.inputs();
    expect(input).toMatchObject({
      turn: 1,
      capabilities: [],
      sessionId: 'sess-9',
      group: 'g1',
      topic: 'support',
      chatJid: 'tg:A',
      secrets: { API_KEY: 'k-123' },
    });
    expect(input!.messages.map((m) => m.id)).toEqual([a1, a2]);
    expect(input!.messages[0]).toEqual({
      id: a1,
      chat_jid: 'tg:A',
      platform: 'tg',
      sender: 'u1',
      sender_name: 'Ursula',
      content: 'first <b>',
      verb: 'message',
      timestamp: expect.any(String),
      platform_msg_id: 'p1',
      sender_role: 'member',
    });
    expect(input!.prompt).toContain('<system>was reset</system>');
    expect(input!.prompt).toContain('first &lt;b&gt;');
    expect(input!.prompt).toMatch(/<message sender="Ursula" chat="tg:A" platform="tg" /);
    expect(states(db, [a1, a2, b1])).toEqual(['running', 'running', 'ready']);
    const log = db.prepare('SELECT * FROM session_log').all() as Array<Record<string, unknown>>;
    expect(log).toEqual([
      expect.objectContaining({
        group_folder: 'g1',
        topic: 'support',
        chat_jid: 'tg:A',
        session_id: 'sess-9',
      }),
    ]);
    expect(log[0]).toMatchObject({ messages: 2, result: null });
    const runIds = db.prepare('SELECT DISTINCT run_id FROM messages WHERE id IN (?, ?)').pluck().all(a1, a2);
    expect(runIds).toEqual([log[0]!.id]);
    expect(db.prepare('SELECT consumed_at FROM system_messages').pluck().get()).not.toBeNull();
  });

  it('commits a reply with the marking of its batch and wakes delivery, before the agent exits', async () => {
    const { db, queue, runtime, outbound } = setup();
    const a1 = ready(db, { chat: 'tg:A', content: 'q1', msgId: 'm-1' });
    const a2 = ready(db, { chat: 'tg:A', content: 'q2', msgId: 'm-2' });
    queue.wake();
    await flush();
    const agent = runtime.agents[0]!;
    agent.reply('<think>hmm</think>the answer', { newSessionId: 'sess-new' });
    agent.reply('<internal>only private</internal>');
    await flush();

    expect(outbound).toHaveLength(1);
    const out = db.prepare('SELECT * FROM messages WHERE id = ?').get(outbound[0]) as Record<string, unknown>;
    expect(out).toMatchObject({
      is_from_me: 1,
      chat_jid: 'tg:A',
      content: 'the answer',
      kind: 'reply',
      delivery: 'pending',
      reply_to_id: a2,
      reply_to: 'm-2',
    });
    expect(states(db, [a1, a2])).toEqual(['done', 'done']);
    expect(db.prepare('SELECT replies FROM session_log').pluck().get()).toBe(1);
    expect(db.prepare('SELECT session_id FROM sessions').pluck().get()).toBe('sess-new');
    expect(agent.ended).toBe(false);
  });

  it('rolls the batch marking back with the reply when the reply row cannot be written', async () => {
    const { db, queue, runtime, outbound } = setup();
    const a1 = ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    db.exec(`CREATE TRIGGER no_out BEFORE INSERT ON messages WHEN NEW.is_from_me = 1
             BEGIN SELECT RAISE(ABORT, 'disk full'); END`);
    runtime.agents[0]!.reply('lost?');
    await flush();
    expect(outbound).toEqual([]);
    expect(states(db, [a1])).toEqual(['running']);
    expect(db.prepare('SELECT replies FROM session_log').pluck().get()).toBe(0);
  });
});

describe('queue: lanes', () => {
  it('never runs two agents for one key, whatever chat feeds it', async () => {
    const { db, queue, runtime } = setup();
    const a = ready(db, { chat: 'tg:A' });
    const b = ready(db, { chat: 'tg:B' });
    queue.wake();
    await flush();
    expect(runtime.agents).toHaveLength(1);
    expect(states(db, [a, b])).toEqual(['running', 'ready']);
    queue.wake();
    await flush();
    expect(runtime.agents).toHaveLength(1);

    runtime.agents[0]!.reply('ok');
    runtime.agents[0]!.finish();
    await flush();
    expect(runtime.agents).toHaveLength(2);
    expect(runtime.agents[1]!.inputs()[0]).toMatchObject({ chatJid: 'tg:B' });
    expect(states(db, [a, b])).toEqual(['done', 'running']);
  });

  it('never runs more than the cap, and starts lanes in the order they became ready', async () => {
    const { db, queue, runtime } = setup({ maxConcurrent: 2 });
    ready(db, { group: 'late', readyAt: 300 });
    ready(db, { group: 'first', readyAt: 100 });
    ready(db, { group: 'third', readyAt: 250 });
    ready(db, { group: 'second', readyAt: 200 });
    queue.wake();
    await flush();
    expect(runtime.agents.map((a) => a.spec.group)).toEqual(['first', 'second']);

    for (let i = 0; i < 3; i++) {
      queue.wake();
      await flush();
      expect(runtime.live().length).toBeLessThanOrEqual(2);
    }
    runtime.agents[1]!.finish();
    await flush();
    expect(runtime.agents.map((a) => a.spec.group)).toEqual(['first', 'second', 'third']);
    runtime.agents[0]!.finish();
    await flush();
    expect(runtime.agents.map((a) => a.spec.group)).toEqual(['first', 'second', 'third', 'late']);
    expect(runtime.live()).toHaveLength(2);
  });

  it('shares slots fairly between groups: a flood of sessions in one group never starves another', async () => {
    const { db, queue, runtime } = setup({ maxConcurrent: 3 });
    // 40 sessions of one group became ready before the quiet group's chat, then a second quiet group.
    for (let i = 0; i < 40; i++) ready(db, { group: 'flood', topic: `t${i}`, readyAt: 100 + i });
    ready(db, { group: 'quiet', readyAt: 500 });
    ready(db, { group: 'calm', readyAt: 600 });
    queue.wake();
    await flush();
    // One slot per group first; the flood's oldest session gets the first.
    expect(runtime.agents.map((a) => `${a.spec.group}/${a.spec.topic}`)).toEqual([
      'flood/t0',
      'quiet/',
      'calm/',
    ]);
    // A group with nothing ready leaves its slot to the flood.
    runtime.agents[1]!.finish();
    await flush();
    expect(runtime.agents.slice(3).map((a) => `${a.spec.group}/${a.spec.topic}`)).toEqual(['flood/t1']);
    // The quiet group's next message goes before the flood's 38 older sessions: it has no run, the flood two.
    ready(db, { group: 'quiet', readyAt: 900 });
    runtime.agents[0]!.finish();
    await flush();
    expect(runtime.agents.slice(4).map((a) => `${a.spec.group}/${a.spec.topic}`)).toEqual(['quiet/']);
    // With the other groups served, the flood takes what is free, oldest session first.
    runtime.agents[2]!.finish();
    await flush();
    expect(runtime.agents.slice(5).map((a) => `${a.spec.group}/${a.spec.topic}`)).toEqual(['flood/t2']);
    expect(runtime.live()).toHaveLength(3);
  });

  it('closes the stdin of an idle agent at once when another lane waits for a slot', async () => {
    const { db, queue, runtime } = setup({ maxConcurrent: 1, idleTimeoutMs: 3_600_000 });
    ready(db, { group: 'busy' });
    queue.wake();
    await flush();
    const first = runtime.agents[0]!;
    ready(db, { group: 'waiting' });
    queue.wake();
    await flush();
    // Still working on its batch: it keeps the slot.
    expect(first.stdinClosed).toBe(false);
    expect(queue.snapshot().waiting.map((l) => [l.group, l.state])).toEqual([['waiting', 'waiting']]);

    first.reply('done with it');
    await flush();
    expect(first.stdinClosed).toBe(true);
    expect(runtime.agents).toHaveLength(1);
    first.finish();
    await flush();
    expect(runtime.agents.map((a) => a.spec.group)).toEqual(['busy', 'waiting']);
  });

  it('pipes a follow-up from the same chat to the running agent; another chat waits its turn', async () => {
    const { db, queue, runtime } = setup();
    const a1 = ready(db, { chat: 'tg:A', content: 'one' });
    queue.wake();
    await flush();
    const agent = runtime.agents[0]!;
    agent.reply('answer one');
    await flush();

    const a2 = ready(db, { chat: 'tg:A', content: 'two' });
    const b1 = ready(db, { chat: 'tg:B', content: 'from B' });
    queue.wake();
    await flush();
    expect(runtime.agents).toHaveLength(1);
    const follow = agent.inputs()[1]!;
    expect(follow).toMatchObject({ type: 'message' });
    expect(follow.messages.map((m) => m.content)).toEqual(['two']);
    expect(follow.prompt).toContain('two');
    const runId = db.prepare('SELECT run_id FROM messages WHERE id = ?').pluck().get(a1);
    expect(db.prepare('SELECT run_id FROM messages WHERE id = ?').pluck().get(a2)).toBe(runId);
    expect(db.prepare('SELECT messages FROM session_log WHERE id = ?').pluck().get(runId)).toBe(2);
    expect(states(db, [a1, a2, b1])).toEqual(['done', 'running', 'ready']);

    agent.reply('answer two');
    agent.finish();
    await flush();
    expect(states(db, [a2])).toEqual(['done']);
    expect(runtime.agents).toHaveLength(2);
    expect(runtime.agents[1]!.inputs()[0]!.messages.map((m) => m.id)).toEqual([b1]);
  });

  it('leaves a message for the next run when the write to a dying agent fails', async () => {
    const { db, queue, runtime } = setup();
    ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    const agent = runtime.agents[0]!;
    agent.reply('ok');
    agent.accepting = false;
    const late = ready(db, { chat: 'tg:A', content: 'late' });
    queue.wake();
    await flush();
    expect(agent.lines).toHaveLength(1);
    expect(states(db, [late])).toEqual(['ready']);

    agent.finish();
    await flush();
    expect(runtime.agents).toHaveLength(2);
    expect(runtime.agents[1]!.inputs()[0]!.messages.map((m) => m.content)).toEqual(['late']);
  });

  it('never writes to an agent it asked to finish, even while its stdin still looks open', async () => {
    const { db, queue, runtime } = setup({ maxConcurrent: 1 });
    ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    const agent = runtime.agents[0]!;
    // A handle whose close takes effect late: only the queue's own bookkeeping can keep the row back.
    agent.closeStdin = () => undefined;
    ready(db, { group: 'other' });
    agent.reply('ok');
    await flush();
    const late = ready(db, { chat: 'tg:A', content: 'after close' });
    queue.wake();
    await flush();
    expect(agent.stdinOpen).toBe(true);
    expect(agent.lines).toHaveLength(1);
    expect(states(db, [late])).toEqual(['ready']);
    agent.finish();
    await flush();
    expect(runtime.agents.map((a) => a.spec.group)).toEqual(['g1', 'other']);
    expect(states(db, [late])).toEqual(['ready']);
  });

  it('gives a follow-up back when the agent exits without answering it', async () => {
    const { db, queue, runtime } = setup();
    const first = ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    const agent = runtime.agents[0]!;
    agent.reply('ok');
    await flush();
    const raced = ready(db, { chat: 'tg:A', content: 'raced the exit' });
    queue.wake();
    await flush();
    expect(states(db, [raced])).toEqual(['running']);
    agent.finish();
    await flush();
    expect(states(db, [first])).toEqual(['done']);
    expect(runtime.agents).toHaveLength(2);
    expect(runtime.agents[1]!.inputs()[0]!.messages.map((m) => m.id)).toEqual([raced]);
    expect(db.prepare('SELECT attempts FROM messages WHERE id = ?').pluck().get(raced)).toBe(0);
  });

  it('reports facts and a snapshot of active and waiting lanes', async () => {
    const { db, queue, runtime } = setup({ maxConcurrent: 1 });
    ready(db, { group: 'a', chat: 'tg:A' });
    ready(db, { group: 'b', chat: 'tg:B', readyAt: 5000 });
    ready(db, { group: 'b', chat: 'tg:B', readyAt: 6000 });
    queue.wake();
    await flush();
    const runId = db.prepare('SELECT id FROM session_log').pluck().get() as number;
    expect(queue.facts({ group: 'a', topic: '' })).toMatchObject({
      running: true,
      runId,
      chatJid: 'tg:A',
      waiting: 0,
      backoffUntil: null,
    });
    expect(queue.facts({ group: 'b', topic: '' })).toMatchObject({ running: false, waiting: 2, runId: null });
    const snap = queue.snapshot();
    expect(snap.active).toEqual([
      expect.objectContaining({ group: 'a', state: 'running', chat_jid: 'tg:A', run_id: runId }),
    ]);
    expect(snap.waiting).toEqual([
      expect.objectContaining({
        group: 'b',
        state: 'waiting',
        chat_jid: 'tg:B',
        since_ms: 5000,
        run_id: null,
      }),
    ]);
    runtime.agents[0]!.reply('bye');
    runtime.agents[0]!.finish();
    await flush();
    runtime.agents[1]!.reply('hi');
    await flush();
    expect(queue.snapshot()).toEqual({
      active: [expect.objectContaining({ group: 'b', state: 'idle', agent_started_ms: expect.any(Number) })],
      waiting: [],
    });
  });

  it('resets a session: the row is gone and a running agent is asked to finish', async () => {
    const { db, queue, runtime } = setup();
    ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    const agent = runtime.agents[0]!;
    agent.reply('hi', { newSessionId: 'old' });
    await flush();
    // The /new command drops the row in its transaction, then tells the queue.
    sessionsOf(db).drop({ group: 'g1', topic: '' });
    queue.resetSession({ group: 'g1', topic: '' });
    expect(agent.stdinClosed).toBe(true);
    expect(db.prepare('SELECT count(*) FROM sessions').pluck().get()).toBe(0);
    agent.reply('bye', { newSessionId: 'old' });
    agent.finish();
    await flush();
    expect(db.prepare('SELECT count(*) FROM sessions').pluck().get()).toBe(0);
    ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    expect(runtime.agents[1]!.inputs()[0]).toMatchObject({ sessionId: null });
  });
});

describe('queue: the lanes gauge', () => {
  it('reads a run that started or ended at once, even within the same second', async () => {
    let read: () => { active: number; waiting: number } = () => ({ active: -1, waiting: -1 });
    const { db, queue, runtime } = setup({
      metrics: { runFinished: () => undefined, lanesFrom: (r) => void (read = r) },
    });
    expect(read()).toEqual({ active: 0, waiting: 0 });
    ready(db, { content: 'one' });
    queue.wake();
    await flush();
    expect(read()).toEqual({ active: 1, waiting: 0 });
    const agent = runtime.agents[0]!;
    agent.reply('done');
    agent.finish();
    await flush(10);
    // The agent exited a few ms after it started: the gauge says so now, not a second later.
    expect(read()).toEqual({ active: 0, waiting: 0 });
  });
});
