import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { createSignals } from '../../core/signals.js';
import { TaskScheduler } from '../../gateway/tasks.js';
import type { Db } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { addTask, getTask, pauseTask, resumeTask } from '../../store/tasks.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { testGateway } from '../helpers/gateway.js';
import { until } from '../helpers/process.js';

const T = (iso: string) => Date.parse(iso);

/** A scheduler on a real database with a hand-moved clock. */
function setup(opts: { tz?: string; maxFailures?: number; start?: string } = {}) {
  const { db } = freshDb();
  addGroup(db, tempDir(), 'ops');
  const clock = { t: T(opts.start ?? '2026-11-23T10:00:00.000Z') };
  let fired = 0;
  let outbound = 0;
  const signals = createSignals();
  const sched = new TaskScheduler({
    db,
    log: silentLogger(),
    tz: opts.tz ?? 'UTC',
    maxFailures: opts.maxFailures ?? 5,
    now: () => clock.t,
    signals,
  });
  signals.queued.on(() => fired++);
  signals.outbound.on(() => outbound++);
  return { db, clock, sched, signals, counts: () => ({ fired, outbound }) };
}

function runs(db: Db, task: number) {
  return db
    .prepare(`SELECT due_at, due_count, message_id FROM task_runs WHERE task_id = ? ORDER BY id`)
    .all(task) as Array<{ due_at: string; due_count: number; message_id: number }>;
}

describe('task scheduler', () => {
  it('a due task becomes one ready row of its group and topic, committed with its next due time', () => {
    const { db, clock, sched, counts } = setup();
    const id = addTask(
      db,
      { group: 'ops', topic: 'daily', chat_jid: 'telegram:42', kind: 'every', spec: '1h', text: 'report' },
      clock.t,
      'UTC',
    );
    expect(sched.fireDue()).toBe(0);
    clock.t += 3_600_000;
    expect(sched.fireDue()).toBe(1);
    expect(counts().fired).toBe(0); // fireDue alone does not wake; a step of the worker does
    const msg = db.prepare(`SELECT * FROM messages WHERE sender = ?`).get(`task:${id}`) as Record<
      string,
      unknown
    >;
    expect(msg).toMatchObject({
      chat_jid: 'telegram:42',
      verb: 'task',
      content: 'report',
      state: 'ready',
      group_folder: 'ops',
      session_topic: 'daily',
      is_from_me: 0,
    });
    expect(getTask(db, id)).toMatchObject({
      next_run_at: '2026-11-23T12:00:00.000Z',
      last_run_at: '2026-11-23T11:00:00.000Z',
      status: 'active',
    });
    expect(runs(db, id)).toEqual([{ due_at: '2026-11-23T11:00:00.000Z', due_count: 1, message_id: msg.id }]);
    // Firing again at the same instant finds nothing due: a due time fires once.
    expect(sched.fireDue()).toBe(0);
  });

  it('due times missed while down fire once, coalesced, and the grid stays the add time + k·interval', () => {
    const { db, clock, sched } = setup();
    const id = addTask(
      db,
      { group: 'ops', chat_jid: 'web:ops', kind: 'every', spec: '10m', text: 'x' },
      clock.t,
      'UTC',
    );
    clock.t = T('2026-11-23T10:10:00.500Z');
    sched.fireDue();
    clock.t = T('2026-11-23T10:55:03Z'); // 10:20 … 10:50 missed
    sched.fireDue();
    clock.t = T('2026-11-23T11:00:00Z');
    sched.fireDue();
    expect(runs(db, id).map((r) => [r.due_at, r.due_count])).toEqual([
      ['2026-11-23T10:10:00.000Z', 1],
      ['2026-11-23T10:50:00.000Z', 4],
      ['2026-11-23T11:00:00.000Z', 1],
    ]);
    expect(db.prepare(`SELECT count(*) FROM messages WHERE verb = 'task'`).pluck().get()).toBe(3);
  });

  it('the poll loop leaves task rows alone: they skip routing and access', async () => {
    const { db } = freshDb();
    const { gateway } = testGateway(db, { groups: ['ops'], pollMs: 20 });
    // A catch-all route that would drop anything the layers saw.
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, '', 'builtin:drop')`).run();
    const id = addTask(
      db,
      { group: 'ops', chat_jid: 'web:elsewhere', kind: 'every', spec: '1s', text: 't' },
      Date.now() - 5000,
      'UTC',
    );
    db.prepare(`UPDATE tasks SET next_run_at = ? WHERE id = ?`).run(
      new Date(Date.now() - 10).toISOString(),
      id,
    );
    const later = insertInbound(db, { chat_jid: 'telegram:9', sender: 'u', content: 'hi' })!;
    gateway.start();
    try {
      await until(
        () => db.prepare(`SELECT state FROM messages WHERE id = ?`).pluck().get(later) === 'dropped',
      );
      await until(() => db.prepare(`SELECT 1 FROM messages WHERE verb = 'task'`).get());
      expect(db.prepare(`SELECT state, group_folder FROM messages WHERE verb = 'task'`).get()).toEqual({
        state: 'ready',
        group_folder: 'ops',
      });
    } finally {
      gateway.stop();
    }
  });

  it('at: fires once and is done', () => {
    const { db, clock, sched } = setup();
    const id = addTask(
      db,
      { group: 'ops', chat_jid: 'web:ops', kind: 'at', spec: '2026-11-23T12:00Z', text: 'once' },
      clock.t,
      'UTC',
    );
    clock.t = T('2026-11-23T13:00:00Z');
    expect(sched.fireDue()).toBe(1);
    expect(getTask(db, id)).toMatchObject({ status: 'done', next_run_at: null });
    clock.t += 86_400_000;
    expect(sched.fireDue()).toBe(0);
  });

  it('cron in Europe/Berlin: fires at 09:00 local on both sides of the spring change', () => {
    const { db, clock, sched } = setup({ tz: 'Europe/Berlin', start: '2026-03-27T12:00:00Z' });
    const id = addTask(
      db,
      { group: 'ops', chat_jid: 'web:ops', kind: 'cron', spec: '0 9 * * *', text: 'morning' },
      clock.t,
      'Europe/Berlin',
    );
    const seen: string[] = [];
    // Step the clock a minute at a time through three days; the scheduler fires whatever is due.
    for (let t = clock.t; t < T('2026-03-30T12:00:00Z'); t += 60_000) {
      clock.t = t;
      sched.fireDue();
    }
    for (const r of runs(db, id)) seen.push(r.due_at);
    expect(seen).toEqual([
      '2026-03-28T08:00:00.000Z',
      '2026-03-29T07:00:00.000Z',
      '2026-03-30T07:00:00.000Z',
    ]);
  });

  it('five failed runs in a row pause the task with one notice to its chat; an answer resets the count', () => {
    const { db, clock, sched } = setup({ maxFailures: 5 });
    const id = addTask(
      db,
      { group: 'ops', chat_jid: 'web:ops', kind: 'every', spec: '1m', text: 'x' },
      clock.t,
      'UTC',
    );
    const fire = () => {
      clock.t += 60_000;
      sched.fireDue();
      return db.prepare(`SELECT max(id) FROM messages WHERE verb = 'task'`).pluck().get() as number;
    };
    const set = db.prepare(`UPDATE messages SET state = ?, attempts = ? WHERE id = ?`);
    // First firing: one failed run (retried with attempts 1), then answered: the count starts over.
    const a = fire();
    set.run('ready', 1, a);
    sched.followRuns();
    expect(getTask(db, id)!.failures).toBe(1);
    set.run('done', 1, a);
    sched.followRuns();
    expect(getTask(db, id)!.failures).toBe(0);
    // Second firing: retried twice and given up on (parked): three failed runs.
    const b = fire();
    set.run('ready', 2, b);
    sched.followRuns();
    set.run('parked', 2, b);
    sched.followRuns();
    expect(getTask(db, id)).toMatchObject({ failures: 3, status: 'active' });
    // Third firing: two more failed runs reach five.
    const c = fire();
    set.run('ready', 2, c);
    expect(sched.followRuns()).toBe(1);
    expect(getTask(db, id)).toMatchObject({ status: 'paused', failures: 5 });
    expect(sched.followRuns()).toBe(0);
    const notices = db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = 'web:ops'`)
      .pluck()
      .all();
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/^Task \d+ is paused: its last 5 runs ended without answering it/);
    // Paused: nothing fires; resumed: failures reset and the next due time is after now.
    clock.t += 600_000;
    expect(sched.fireDue()).toBe(0);
    expect(resumeTask(db, id, clock.t, 'UTC')).toBe(true);
    expect(getTask(db, id)).toMatchObject({ status: 'active', failures: 0 });
    expect(Date.parse(getTask(db, id)!.next_run_at!)).toBeGreaterThan(clock.t);
    expect(pauseTask(db, id)).toBe(true);
    expect(pauseTask(db, id)).toBe(false);
  });

  it('a task whose group is gone is paused with a notice instead of firing', () => {
    const { db, clock, sched } = setup();
    const id = addTask(
      db,
      { group: 'ops', chat_jid: 'web:ops', kind: 'every', spec: '1m', text: 'x' },
      clock.t,
      'UTC',
    );
    db.prepare(`DELETE FROM registered_groups WHERE folder = 'ops'`).run();
    clock.t += 60_000;
    expect(sched.fireDue()).toBe(0);
    expect(getTask(db, id)).toMatchObject({ status: 'paused', error: "group 'ops' is not registered" });
  });

  it('refuses a bad task with a named error and stores nothing', () => {
    const { db, clock } = setup();
    const base = { group: 'ops', chat_jid: 'web:ops', kind: 'every' as const, spec: '1m', text: 'x' };
    expect(() => addTask(db, { ...base, group: 'nope' }, clock.t, 'UTC')).toThrow("no group 'nope'");
    expect(() => addTask(db, { ...base, chat_jid: 'nochat' }, clock.t, 'UTC')).toThrow(/bad chat 'nochat'/);
    expect(() => addTask(db, { ...base, topic: 'bad topic' }, clock.t, 'UTC')).toThrow(/bad topic/);
    expect(() => addTask(db, { ...base, text: '  ' }, clock.t, 'UTC')).toThrow(/empty/);
    expect(() => addTask(db, { ...base, spec: '1x' }, clock.t, 'UTC')).toThrow(/bad duration '1x'/);
    expect(db.prepare('SELECT count(*) FROM tasks').pluck().get()).toBe(0);
  });

  it('a started scheduler looks at once when `tasks` fires: a task added in this process needs no timer', async () => {
    const { db, clock, sched, signals, counts } = setup();
    sched.start();
    try {
      // The first step (a 0 ms timer, before this 5 ms one) finds nothing due: the worker then waits for
      // nothing at all (no interval in this test).
      await new Promise((r) => setTimeout(r, 5));
      clock.t -= 3_600_000;
      addTask(
        db,
        { group: 'ops', topic: '', chat_jid: 'telegram:42', kind: 'every', spec: '1h', text: 'r' },
        clock.t,
        'UTC',
      );
      clock.t += 3_600_000;
      expect(counts().fired).toBe(0);
      signals.tasks.fire();
      await until(() => counts().fired === 1, 2000, 'the task fired');
    } finally {
      await sched.stop();
    }
  });
});
