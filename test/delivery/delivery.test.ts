import { afterEach, describe, expect, it, vi } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import { silentLogger } from '../../core/log.js';
import { createDelivery, type Delivery, type DeliveryOptions } from '../../delivery/delivery.js';
import { backoffDelay } from '../../core/backoff.js';
import type { Db } from '../../store/db.js';
import { insertOutbound } from '../../store/messages.js';
import { freshDb, throwingGroupCommit } from '../helpers/db.js';
import Database from 'better-sqlite3';
import { setTimeout as realTimeout } from 'node:timers/promises';
import { manualSleep, ScriptChannel } from './script-channel.js';
import { countSql } from '../../bench/sql-count.js';

interface OutRow {
  id: number;
  delivery: string;
  delivery_attempts: number;
  delivery_error: string | null;
  delivered_at: string | null;
  parts_sent: number;
}

const live: Delivery[] = [];
afterEach(async () => {
  while (live.length) await live.pop()!.stop();
  vi.useRealTimers();
});

function deliver(opts: Partial<DeliveryOptions> & Pick<DeliveryOptions, 'db' | 'channels'>): Delivery {
  const d = createDelivery({ log: silentLogger(), pollMs: 0, ...opts });
  live.push(d);
  return d;
}

function row(db: Db, id: number): OutRow {
  return db
    .prepare(
      'SELECT id, delivery, delivery_attempts, delivery_error, delivered_at, parts_sent FROM messages WHERE id = ?',
    )
    .get(id) as OutRow;
}

function parts(db: Db, id: number): Array<{ part: number; platform_msg_id: string | null }> {
  return db
    .prepare('SELECT part, platform_msg_id FROM outbound_parts WHERE message_id = ? ORDER BY part')
    .all(id) as Array<{ part: number; platform_msg_id: string | null }>;
}

const out = (db: Db, chat: string, content: string, extra: { reply_to?: string; topic?: string } = {}) =>
  insertOutbound(db, { chat_jid: chat, content, kind: 'reply', ...extra });

describe('delivery', () => {
  it('delivers each chat in id order, records every part and marks the row sent', async () => {
    const { db } = freshDb();
    const ch = new ScriptChannel('test', 20);
    const a1 = out(db, 'test:a', 'first', { reply_to: '77', topic: '5' });
    const b1 = out(db, 'test:b', 'other chat');
    const a2 = out(db, 'test:a', 'second reply is long enough to split in two');
    const d = deliver({ db, channels: [ch] });
    d.start();
    await d.idle();
    expect(ch.texts('test:a')).toEqual(['first', 'second reply is long', 'enough to split in', 'two']);
    expect(ch.texts('test:b')).toEqual(['other chat']);
    expect(ch.accepted[0]).toMatchObject({
      messageId: a1,
      part: 0,
      parts: 1,
      replyTo: '77',
      topic: '5',
      previousPartId: null,
    });
    // The platform numbers messages as it accepts them (test-1, test-2, …) across both chats.
    const ids = ch.accepted.flatMap((p, i) => (p.messageId === a2 ? [`test-${i + 1}`] : []));
    expect(ch.accepted.filter((p) => p.messageId === a2).map((p) => p.previousPartId)).toEqual([
      null,
      ids[0],
      ids[1],
    ]);
    for (const id of [a1, a2, b1]) {
      expect(row(db, id)).toMatchObject({ delivery: 'sent', delivery_attempts: 0 });
      expect(row(db, id).delivered_at).toMatch(/^\d{4}-\d\d-\d\dT.*Z$/);
    }
    expect(parts(db, a2)).toEqual(ids.map((platform_msg_id, part) => ({ part, platform_msg_id })));
    expect(row(db, a2).parts_sent).toBe(3);
  });

  it('delivers a reply that names no file without reading outbound_files, its last part in one UPDATE', async () => {
    const { db } = freshDb();
    const ch = new ScriptChannel('test', 20);
    const a = out(db, 'test:a', 'plain');
    const sql = countSql();
    try {
      const d = deliver({ db, channels: [ch] });
      d.start();
      await d.idle();
      expect(ch.texts('test:a')).toEqual(['plain']);
      expect(row(db, a)).toMatchObject({ delivery: 'sent', parts_sent: 1 });
      const calls = (prefix: string) =>
        sql
          .top(1000)
          .filter((s) => s.sql.startsWith(prefix))
          .reduce((n, s) => n + s.calls, 0);
      expect(calls('SELECT seq, path, abs_path, name, mime FROM outbound_files')).toBe(0);
      expect(calls('UPDATE messages SET')).toBe(1);
    } finally {
      sql.stop();
    }
  });

  it('leaves rows of platforms without a channel, and chats outside `only`, untouched', async () => {
    const { db } = freshDb();
    const ch = new ScriptChannel('local');
    const other = out(db, 'telegram:1', 'not mine');
    const mine = out(db, 'local:demo', 'mine');
    const notMine = out(db, 'local:else', 'another terminal');
    const d = deliver({ db, channels: [ch], only: ['local:demo'] });
    d.start();
    await d.idle();
    expect(ch.texts('local:demo')).toEqual(['mine']);
    expect(row(db, mine).delivery).toBe('sent');
    for (const id of [other, notMine]) {
      expect(row(db, id)).toMatchObject({ delivery: 'pending', delivery_attempts: 0, parts_sent: 0 });
    }
  });

  it('waits retry_after for a rate-limited chat while other chats go on', async () => {
    const { db } = freshDb();
    const ch = new ScriptChannel();
    const s = manualSleep();
    ch.failNext(new DeliveryError('rate_limited', '429: Too Many Requests', 30_000, 429));
    const slow = out(db, 'test:slow', 'later');
    const d = deliver({ db, channels: [ch], sleep: s.sleep });
    d.start();
    await s.waitedTimes(1);
    expect(s.waits[0]!.ms).toBe(30_000);
    const fast = out(db, 'test:fast', 'now');
    d.wake('test:fast');
    d.wake('test:slow');
    await vi.waitFor(() => expect(row(db, fast).delivery).toBe('sent'));
    expect(row(db, slow)).toMatchObject({ delivery: 'pending', delivery_attempts: 1 });
    expect(row(db, slow).delivery_error).toContain('429');
    s.waits[0]!.release();
    await d.idle();
    expect(row(db, slow)).toMatchObject({ delivery: 'sent', delivery_attempts: 1, delivery_error: null });
    expect(ch.texts('test:slow')).toEqual(['later']);
  });

  it('retries transient failures with growing, capped, jittered delays', async () => {
    const { db } = freshDb();
    const ch = new ScriptChannel();
    const s = manualSleep(true);
    ch.failNext(new DeliveryError('transient', '502: Bad Gateway', undefined, 502), 6);
    const id = out(db, 'test:a', 'eventually');
    const d = deliver({
      db,
      channels: [ch],
      sleep: s.sleep,
      backoff: { baseMs: 100, maxMs: 1000, random: () => 0.5 },
    });
    d.start();
    await d.idle();
    expect(s.waits.map((w) => w.ms)).toEqual([75, 150, 300, 600, 750, 750]);
    expect(row(db, id)).toMatchObject({ delivery: 'sent', delivery_attempts: 6 });
    expect(ch.texts('test:a')).toEqual(['eventually']);
  });

  it('records a permanent refusal on the row and goes on with the next row of the chat', async () => {
    const { db } = freshDb();
    const ch = new ScriptChannel();
    ch.failNext(new DeliveryError('permanent', '403: Forbidden: bot was kicked', undefined, 403));
    const metrics: string[] = [];
    const bad = out(db, 'test:a', 'refused');
    const next = out(db, 'test:a', 'accepted');
    const d = deliver({ db, channels: [ch], metrics: { outbound: (o) => metrics.push(o) } });
    d.start();
    await d.idle();
    expect(row(db, bad)).toMatchObject({
      delivery: 'failed',
      delivery_attempts: 1,
      delivery_error: '403: Forbidden: bot was kicked',
    });
    expect(ch.calls.filter((c) => c.messageId === bad)).toHaveLength(1);
    expect(row(db, next).delivery).toBe('sent');
    expect(metrics).toEqual(['failed', 'delivered']);
  });

  it('resumes a split reply after a restart and sends every part exactly once', async () => {
    const { db, reopen } = freshDb();
    const text = Array.from({ length: 5 }, (_, i) => `part number ${i}`).join('\n\n');
    const id = out(db, 'test:a', text);
    const ch1 = new ScriptChannel('test', 16);
    // Parts 0 and 1 go out, then part 2 hits a 5xx and the process stops while waiting to retry.
    ch1.acceptNext(2);
    ch1.failNext(new DeliveryError('transient', '500: Internal Server Error', undefined, 500), 5);
    const s = manualSleep();
    const first = deliver({ db, channels: [ch1], sleep: s.sleep });
    first.start();
    await s.waitedTimes(1);
    await first.stop();
    expect(row(db, id)).toMatchObject({ delivery: 'pending' });
    const sentBefore = row(db, id).parts_sent;
    expect(sentBefore).toBe(2);
    expect(ch1.texts('test:a')).toHaveLength(2);

    const db2 = reopen();
    const ch2 = new ScriptChannel('test', 16);
    const second = deliver({ db: db2, channels: [ch2] });
    second.start();
    await second.idle();
    expect([...ch1.texts('test:a'), ...ch2.texts('test:a')]).toEqual(
      [0, 1, 2, 3, 4].map((i) => `part number ${i}`),
    );
    expect(ch2.accepted[0]!.part).toBe(sentBefore);
    expect(ch2.accepted[0]!.previousPartId).toBe(`test-${sentBefore}`);
    expect(parts(db2, id).map((p) => p.part)).toEqual([0, 1, 2, 3, 4]);
    expect(row(db2, id)).toMatchObject({ delivery: 'sent', parts_sent: 5 });

    const third = deliver({ db: reopen(), channels: [ch2] });
    third.start();
    await third.idle();
    expect(ch2.accepted).toHaveLength(5 - sentBefore);
  });

  it('stop() lets a send in flight finish and records it', async () => {
    const { db } = freshDb();
    const ch = new ScriptChannel();
    const release = ch.hold();
    const id = out(db, 'test:a', 'in flight');
    const d = deliver({ db, channels: [ch] });
    d.start();
    await vi.waitFor(() => expect(ch.calls).toHaveLength(1));
    let stopped = false;
    const stopping = d.stop().then(() => (stopped = true));
    await Promise.resolve();
    expect(stopped).toBe(false);
    release();
    await stopping;
    expect(row(db, id).delivery).toBe('sent');
  });

  it('finds rows written later: wake(chat) at once, other processes by the poll timer', async () => {
    vi.useFakeTimers();
    const { db, reopen } = freshDb();
    const ch = new ScriptChannel();
    const d = deliver({ db, channels: [ch], pollMs: 1000 });
    d.start();
    const a = out(db, 'test:a', 'woken');
    d.wake('test:a');
    await d.idle();
    expect(row(db, a).delivery).toBe('sent');
    const b = out(reopen(), 'test:b', 'polled');
    await d.idle();
    expect(row(db, b).delivery).toBe('pending');
    await vi.advanceTimersByTimeAsync(1000);
    await d.idle();
    expect(row(db, b).delivery).toBe('sent');
  });

  it('marks an empty reply failed, and a pending row whose parts all went out sent, without sending', async () => {
    const { db } = freshDb();
    const ch = new ScriptChannel();
    const empty = out(db, 'test:a', '  \n ');
    const done = out(db, 'test:a', 'already out');
    db.prepare('UPDATE messages SET parts_sent = 1 WHERE id = ?').run(done);
    const d = deliver({ db, channels: [ch] });
    d.start();
    await d.idle();
    expect(row(db, empty)).toMatchObject({
      delivery: 'failed',
      delivery_error: 'empty reply: nothing to send',
    });
    expect(row(db, done).delivery).toBe('sent');
    expect(ch.calls).toEqual([]);
  });

  it('gives up after maxAttempts transient failures, and treats unknown errors as transient', async () => {
    const { db } = freshDb();
    const ch = new ScriptChannel();
    ch.send = async () => {
      throw new TypeError('fetch failed');
    };
    const id = out(db, 'test:a', 'never');
    const d = deliver({ db, channels: [ch], sleep: manualSleep(true).sleep, maxAttempts: 3 });
    d.start();
    await d.idle();
    expect(row(db, id)).toMatchObject({
      delivery: 'failed',
      delivery_attempts: 3,
      delivery_error: 'fetch failed',
    });
  });
});

describe('backoffDelay', () => {
  it('doubles from the base, caps at the maximum, and jitters within [half, full)', () => {
    expect(
      [1, 2, 3, 4].map((n) => backoffDelay(n, { baseMs: 1000, maxMs: 5000, random: () => 0.999 })),
    ).toEqual([1000, 1999, 3998, 4998]);
    expect(backoffDelay(50, { baseMs: 1000, maxMs: 60_000, random: () => 0 })).toBe(30_000);
  });

  it('records an accepted part once another connection lets go of the write lock, the event loop free meanwhile', async () => {
    const { db, path } = freshDb();
    throwingGroupCommit(db);
    const ch = new ScriptChannel();
    const id = out(db, 'test:a', 'hello');
    const release = ch.hold();
    const d = deliver({ db, channels: [ch] });
    d.start();
    for (let i = 0; i < 50 && ch.calls.length === 0; i++) await realTimeout(5);
    expect(ch.calls).toHaveLength(1);
    // The platform takes the part while another connection of this thread holds the lock: a record that
    // slept in the busy handler would sleep its whole timeout (30 s), since the holder waits for this loop.
    const other = new Database(path);
    other.exec('BEGIN IMMEDIATE');
    release();
    const ticks: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t = performance.now();
      await realTimeout(10);
      ticks.push(performance.now() - t);
    }
    expect(Math.max(...ticks)).toBeLessThan(500);
    expect(ch.accepted).toHaveLength(1);
    expect(row(db, id)).toMatchObject({ delivery: 'pending', parts_sent: 0 });
    other.exec('COMMIT');
    other.close();
    await d.idle();
    expect(row(db, id)).toMatchObject({ delivery: 'sent', parts_sent: 1, delivery_attempts: 0 });
    expect(parts(db, id)).toEqual([{ part: 0, platform_msg_id: 'test-1' }]);
    expect(ch.calls).toHaveLength(1);
  });
});
