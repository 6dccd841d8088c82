import { describe, expect, it, vi } from 'vitest';
import { freshDb } from '../helpers/db.js';
import { flush, handQueue, ready, states, useQueueClock } from './helpers.js';
import { PUMP_FAILED_RETRY_MS } from '../../queue/scheduler.js';
import { SETTLE_RETRY_MS } from '../../queue/recorder.js';

const queues = useQueueClock();

function setup(over: Parameters<typeof handQueue>[1] = {}) {
  const fresh = freshDb();
  const h = handQueue(fresh.db, { idleTimeoutMs: 1000, runTimeoutMs: 3_600_000, ...over });
  queues.push(h.queue);
  return { ...fresh, ...h };
}

const row = (db: ReturnType<typeof freshDb>['db'], id: number) =>
  db.prepare('SELECT state, attempts, not_before, run_id FROM messages WHERE id = ?').get(id) as {
    state: string;
    attempts: number;
    not_before: number | null;
    run_id: number;
  };
const lastRun = (db: ReturnType<typeof freshDb>['db']) =>
  db.prepare('SELECT * FROM session_log ORDER BY id DESC LIMIT 1').get() as Record<string, unknown>;

describe('queue: failure rule', () => {
  it('retries a run that failed before any output, with backoff, and evicts the session', async () => {
    const { db, queue, runtime } = setup();
    db.prepare(`INSERT INTO sessions (group_folder, topic, session_id) VALUES ('g1', '', 's-old')`).run();
    db.prepare(`INSERT INTO system_messages (group_folder, topic, content) VALUES ('g1', '', 'note')`).run();
    const id = ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    runtime.agents[0]!.finish({ code: 2, stderrTail: 'Traceback: boom\n' });
    await flush();

    expect(row(db, id)).toMatchObject({ state: 'ready', attempts: 1, not_before: 1_000_000 + 750 });
    expect(lastRun(db)).toMatchObject({ result: 'error', error: 'exit code 2', exit_code: 2 });
    expect(lastRun(db).stderr_tail).toBe('Traceback: boom\n');
    expect(lastRun(db).ended_at).toEqual(expect.any(String));
    expect(db.prepare('SELECT count(*) FROM sessions').pluck().get()).toBe(0);
    expect(db.prepare('SELECT consumed_at FROM system_messages').pluck().get()).toBeNull();
    expect(queue.facts({ group: 'g1', topic: '' }).backoffUntil).toBe(1_000_750);

    await vi.advanceTimersByTimeAsync(749);
    await flush();
    expect(runtime.agents).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    await flush();
    expect(runtime.agents).toHaveLength(2);
    const input = runtime.agents[1]!.inputs()[0]!;
    expect(input).toMatchObject({ sessionId: null });
    expect(input.prompt).toContain('note');
    expect(input.messages.map((m) => m.id)).toEqual([id]);
  });

  it('keeps what a run delivered and does not retry when it fails after output', async () => {
    const { db, queue, runtime, outbound } = setup();
    const id = ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    runtime.agents[0]!.reply('partial answer', { newSessionId: 's-1' });
    runtime.agents[0]!.finish({ code: 1 });
    await flush();
    expect(outbound).toHaveLength(1);
    expect(row(db, id)).toMatchObject({ state: 'done', attempts: 0 });
    expect(lastRun(db)).toMatchObject({ result: 'error', replies: 1 });
    expect(db.prepare('SELECT session_id FROM sessions').pluck().get()).toBe('s-1');
    await vi.advanceTimersByTimeAsync(120_000);
    await flush();
    expect(runtime.agents).toHaveLength(1);
  });

  it('parks a chat after three failures with one error reply, and rejoins on its next message', async () => {
    const { db, queue, runtime, outbound } = setup();
    const first = ready(db, { chat: 'tg:A', msgId: 'm1' });
    queue.wake();
    await flush();
    for (let n = 0; n < 3; n++) {
      expect(runtime.agents).toHaveLength(n + 1);
      runtime.agents[n]!.finish({ code: 1 });
      await flush();
      await vi.advanceTimersByTimeAsync(60_000);
      await flush();
    }
    expect(runtime.agents).toHaveLength(3);
    expect(row(db, first)).toMatchObject({ state: 'parked', attempts: 2 });
    expect(outbound).toHaveLength(1);
    expect(
      db.prepare('SELECT kind, chat_jid, reply_to_id, reply_to FROM messages WHERE id = ?').get(outbound[0]),
    ).toEqual({ kind: 'error', chat_jid: 'tg:A', reply_to_id: first, reply_to: 'm1' });

    const next = ready(db, { chat: 'tg:A', content: 'again' });
    queue.wake();
    await flush();
    expect(runtime.agents).toHaveLength(4);
    expect(runtime.agents[3]!.inputs()[0]!.messages.map((m) => m.id)).toEqual([first, next]);
    // Back once, marked at the limit: failing again parks it for good, without a second notice, and the
    // new message is retried alone (a message that crashes every agent never holds its chat hostage).
    expect(row(db, first)).toMatchObject({ state: 'running', attempts: 3 });
    runtime.agents[3]!.finish({ code: 1 });
    await flush();
    expect(row(db, first)).toMatchObject({ state: 'parked' });
    expect(row(db, next)).toMatchObject({ state: 'ready', attempts: 1 });
    expect(outbound).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(60_000);
    await flush();
    expect(runtime.agents).toHaveLength(5);
    expect(runtime.agents[4]!.inputs()[0]!.messages.map((m) => m.id)).toEqual([next]);
    ready(db, { chat: 'tg:A', content: 'once more' });
    queue.wake();
    await flush();
    expect(row(db, first)).toMatchObject({ state: 'parked' });
  });

  it('an agent that says why it cannot answer now: retried, the reason kept and told, the session kept', async () => {
    const { db, queue, runtime, outbound } = setup();
    db.prepare(`INSERT INTO sessions (group_folder, topic, session_id) VALUES ('g1', '', 's-1')`).run();
    const id = ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    const why = 'the Claude API is overloaded (HTTP 529)';
    for (let n = 0; n < 3; n++) {
      // A retry block answers nothing: the turn stays open, and the exit makes it a failure like any other.
      runtime.agents[n]!.reply(null, { status: 'error', retry: true, error: why, turn: 1 });
      runtime.agents[n]!.finish({ code: 75 });
      await flush();
      expect(lastRun(db)).toMatchObject({ result: 'error', error: `exit code 75: ${why}`, replies: 0 });
      // Unlike a run with no output at all, it keeps its session: the retry resumes the conversation.
      expect(db.prepare('SELECT session_id FROM sessions').pluck().get()).toBe('s-1');
      await vi.advanceTimersByTimeAsync(60_000);
      await flush();
    }
    expect(runtime.agents).toHaveLength(3);
    expect(runtime.agents[2]!.inputs()[0]).toMatchObject({ sessionId: 's-1' });
    expect(row(db, id).state).toBe('parked');
    expect(outbound).toHaveLength(1);
    expect(db.prepare('SELECT content FROM messages WHERE id = ?').pluck().get(outbound[0])).toBe(
      `The agent could not answer (3 attempts, the last one failed: ${why}). Send a new message to try again.`,
    );
  });

  it('treats an agent that cannot be started as a failure before output', async () => {
    const { db, queue, runtime } = setup();
    runtime.startFails = 1;
    const id = ready(db, {});
    queue.wake();
    await flush();
    expect(lastRun(db)).toMatchObject({
      result: 'error',
      error: 'start failed: no such image',
      exit_code: null,
    });
    expect(row(db, id)).toMatchObject({ state: 'ready', attempts: 1 });
    await vi.advanceTimersByTimeAsync(1000);
    await flush();
    expect(runtime.agents).toHaveLength(1);
  });
});

describe('queue: timeouts, stop, restart, shutdown', () => {
  it('closes stdin after the idle timeout that follows the last output; follow-ups hold it off', async () => {
    const { db, queue, runtime } = setup();
    ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    const agent = runtime.agents[0]!;
    await vi.advanceTimersByTimeAsync(5000);
    expect(agent.stdinClosed).toBe(false);
    agent.reply('one');
    await flush();
    await vi.advanceTimersByTimeAsync(900);
    ready(db, { chat: 'tg:A', content: 'follow' });
    queue.wake();
    await flush();
    await vi.advanceTimersByTimeAsync(5000);
    expect(agent.stdinClosed).toBe(false);
    agent.reply('two');
    await flush();
    await vi.advanceTimersByTimeAsync(999);
    expect(agent.stdinClosed).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(agent.stdinClosed).toBe(true);
    agent.finish();
    await flush();
    expect(lastRun(db)).toMatchObject({ result: 'ok', replies: 2, messages: 2 });
  });

  it('kills a run at the hard timeout and logs it as timeout', async () => {
    const { db, queue, runtime } = setup({ runTimeoutMs: 10_000 });
    const id = ready(db, {});
    queue.wake();
    await flush();
    await vi.advanceTimersByTimeAsync(9_999);
    expect(runtime.agents[0]!.killed).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await flush();
    expect(runtime.agents[0]!.killed).toBe(true);
    expect(lastRun(db)).toMatchObject({ result: 'timeout', error: 'no exit within 10000 ms' });
    expect(row(db, id)).toMatchObject({ state: 'ready', attempts: 1 });
  });

  it('ends a run whose start never comes back at the hard timeout, and kills the agent that comes late', async () => {
    // A start through the spawner whose socket gated could not receive (its descriptors exhausted) never
    // resolves: the run must still end by its timeout and free its slot.
    const { db, queue, runtime } = setup({ runTimeoutMs: 10_000, maxConcurrent: 1 });
    runtime.startHolds = 1;
    const id = ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    expect(runtime.held).toHaveLength(1);
    expect(queue.active()).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(10_000);
    await flush();
    expect(runtime.held[0]!.signal?.aborted).toBe(true);
    expect(queue.active()).toHaveLength(0);
    expect(lastRun(db)).toMatchObject({
      result: 'timeout',
      error: 'the agent did not start within the run timeout (10000 ms)',
    });
    expect(row(db, id)).toMatchObject({ state: 'ready', attempts: 1 });
    // The slot is free: the retry runs on a new agent, and the late one is killed, never fed.
    await vi.advanceTimersByTimeAsync(1_000);
    await flush();
    const late = runtime.held[0]!.arrive();
    await flush();
    expect(late.killed).toBe(true);
    expect(late.lines).toEqual([]);
    const retry = runtime.agents.find((a) => a !== late)!;
    expect(retry.inputs()[0]!.messages.map((m) => m.id)).toEqual([id]);
    retry.reply('ok');
    await flush();
    expect(row(db, id).state).toBe('done');
  });

  it('stops the lane of the chat: batch stopped, never retried', async () => {
    const { db, queue, runtime } = setup();
    const id = ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    expect(await queue.stop({ group: 'g1', topic: '' }, 'tg:B')).toBe(false);
    expect(await queue.stop({ group: 'nope', topic: '' })).toBe(false);
    expect(await queue.stop({ group: 'g1', topic: '' }, 'tg:A')).toBe(true);
    expect(runtime.agents[0]!.killed).toBe(true);
    expect(row(db, id).state).toBe('stopped');
    expect(lastRun(db)).toMatchObject({ result: 'stopped' });
    await vi.advanceTimersByTimeAsync(120_000);
    await flush();
    expect(runtime.agents).toHaveLength(1);
  });

  it('reruns an interrupted run with its messages after a restart', async () => {
    const { db, reopen } = setup();
    const crashed = handQueue(db);
    const a = ready(db, { chat: 'tg:A', content: 'one' });
    const b = ready(db, { chat: 'tg:A', content: 'two' });
    crashed.queue.wake();
    await flush();
    expect(states(db, [a, b])).toEqual(['running', 'running']);
    const oldRun = lastRun(db).id;
    // gated dies here: no settle, no close. A new process opens the same file.
    const db2 = reopen();
    const h = handQueue(db2);
    queues.push(h.queue);
    h.queue.recover();
    await flush();
    expect(db2.prepare('SELECT result, error FROM session_log WHERE id = ?').get(oldRun)).toEqual({
      result: 'error',
      error: 'interrupted: gated restarted',
    });
    expect(h.runtime.agents).toHaveLength(1);
    expect(h.runtime.agents[0]!.inputs()[0]!.messages.map((m) => m.id)).toEqual([a, b]);
    h.runtime.agents[0]!.reply('answered once');
    await flush();
    expect(states(db2, [a, b])).toEqual(['done', 'done']);
    expect(db2.prepare('SELECT count(*) FROM messages WHERE is_from_me = 1').pluck().get()).toBe(1);
    crashed.runtime.agents[0]!.finish();
  });

  it('on close lets runs finish within the grace, then kills and gives the rows back', async () => {
    const { db, queue, runtime } = setup({ maxConcurrent: 2 });
    const polite = ready(db, { group: 'polite' });
    const stubborn = ready(db, { group: 'stubborn' });
    queue.wake();
    await flush();
    const [p, s] = runtime.agents;
    const closed = queue.close(5000);
    expect(queue.close(5000)).toBe(closed);
    expect(p!.stdinClosed && s!.stdinClosed).toBe(true);
    p!.reply('bye');
    p!.finish();
    await flush();
    await vi.advanceTimersByTimeAsync(4999);
    expect(s!.killed).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await closed;
    expect(s!.killed).toBe(true);
    expect(states(db, [polite, stubborn])).toEqual(['done', 'ready']);
    expect(row(db, stubborn).attempts).toBe(0);
    ready(db, { group: 'late' });
    queue.wake();
    await flush();
    expect(runtime.agents).toHaveLength(2);
  });

  it('a pump that failed runs again by itself, with no wake from anything else', async () => {
    const { db, queue, runtime } = setup();
    // A parked row the pump gives back (a newer row of its chat is ready), and a statement that fails on
    // it: the whole pump throws.
    const parked = ready(db, { chat: 'tg:A' });
    db.prepare(`UPDATE messages SET state = 'parked', attempts = 0 WHERE id = ?`).run(parked);
    db.exec(`CREATE TEMP TRIGGER fail_rejoin BEFORE UPDATE OF state ON messages
             WHEN OLD.state = 'parked' BEGIN SELECT RAISE(ABORT, 'disk trouble'); END`);
    const id = ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    expect(runtime.agents).toHaveLength(0);
    expect(states(db, [id, parked])).toEqual(['ready', 'parked']);
    // The trouble passes; nothing new arrives, nobody wakes the queue.
    db.exec('DROP TRIGGER fail_rejoin');
    await vi.advanceTimersByTimeAsync(PUMP_FAILED_RETRY_MS - 1);
    await flush();
    expect(runtime.agents).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(1);
    await flush();
    expect(runtime.agents).toHaveLength(1);
    expect(runtime.agents[0]!.inputs()[0]!.messages.map((m) => m.id)).toEqual([parked, id]);
    expect(states(db, [id, parked])).toEqual(['running', 'running']);
  });

  it('a settle that failed is tried again, so the rows do not stay running without a run', async () => {
    const { db, queue, runtime } = setup();
    const id = ready(db, { chat: 'tg:A' });
    queue.wake();
    await flush();
    const agent = runtime.agents[0]!;
    agent.reply('answer');
    await flush();
    // A follow-up joins the run as its second turn; the agent exits without answering it.
    const next = ready(db, { chat: 'tg:A', content: 'and another thing' });
    queue.wake();
    await flush();
    expect(agent.inputs()).toHaveLength(2);
    // The run's end cannot be stored for now (a full disk would do the same).
    db.exec(`CREATE TEMP TRIGGER fail_settle BEFORE UPDATE OF result ON session_log
             BEGIN SELECT RAISE(ABORT, 'disk trouble'); END`);
    agent.finish({ code: 3 });
    await flush();
    expect(lastRun(db).result).toBeNull();
    expect(states(db, [id, next])).toEqual(['done', 'running']);
    db.exec('DROP TRIGGER fail_settle');
    await vi.advanceTimersByTimeAsync(SETTLE_RETRY_MS[0]! - 1);
    await flush();
    expect(lastRun(db).result).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    await flush();
    // Settled by the retry, as it would have been at once: the unanswered turn is retried later.
    expect(lastRun(db)).toMatchObject({ result: 'error', exit_code: 3 });
    expect(row(db, next)).toMatchObject({ state: 'ready', attempts: 0 });
  });
});
