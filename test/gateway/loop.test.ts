import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { insertInbound, insertOutbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';
import { answers, EXAMPLE_GROUPS, loadExampleRoutes, row, testGateway } from '../helpers/gateway.js';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('poll loop', () => {
  it('processes rows stored before the first start, then persists the cursor across a restart', async () => {
    const { db, reopen } = freshDb();
    loadExampleRoutes(db);
    const before = insertInbound(db, { chat_jid: 'discord:1', sender: 'a', content: 'early' })!;
    const { gateway } = testGateway(db, { groups: EXAMPLE_GROUPS });
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(row(db, before).state).toBe('ready');
    expect(gateway.loop.cursor()).toBe(before);
    gateway.stop();
    db.close();

    // "Restart": a new connection and gateway on the same file.
    const db2 = reopen();
    const later = insertInbound(db2, { chat_jid: 'discord:1', sender: 'a', content: 'later' })!;
    const { gateway: g2 } = testGateway(db2);
    expect(g2.loop.cursor()).toBe(before);
    g2.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(row(db2, later).state).toBe('ready');
    expect(row(db2, before).state).toBe('ready');
    expect(
      db2.prepare('SELECT count(*) FROM messages WHERE is_from_me = 0 AND state IS NULL').pluck().get(),
    ).toBe(0);
    g2.stop();
  });

  it('drains a backlog of many batches and leaves the cursor on the last row', async () => {
    const { db } = freshDb();
    loadExampleRoutes(db);
    const { gateway } = testGateway(db, { groups: EXAMPLE_GROUPS, batchSize: 7 });
    const ids = Array.from({ length: 50 }, (_, i) =>
      insertInbound(db, { chat_jid: `discord:${i}`, sender: 's', content: `m${i}` })!,
    );
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    for (const id of ids) expect(row(db, id).state).toBe('ready');
    expect(gateway.loop.cursor()).toBe(ids[ids.length - 1]);
    // An outbound row written meanwhile is not an inbound row: it never moves the cursor.
    db.prepare(
      `INSERT INTO messages (chat_jid, sender, content, is_from_me) VALUES ('discord:1', 'g', 'r', 1)`,
    ).run();
    const next = insertInbound(db, { chat_jid: 'discord:1', sender: 's', content: 'later' })!;
    await vi.advanceTimersByTimeAsync(2000);
    expect(row(db, next).state).toBe('ready');
    expect(gateway.loop.cursor()).toBe(next);
    gateway.stop();
  });

  it('lets the event loop run between slices of a backlog and says when it fell behind and caught up', async () => {
    const { db } = freshDb();
    loadExampleRoutes(db);
    // A slice of 0 ms: each step takes one batch, then yields.
    const { gateway, signals } = testGateway(db, {
      groups: EXAMPLE_GROUPS,
      batchSize: 7,
      sliceMs: 0,
      pollMs: 60_000,
    });
    const behind: boolean[] = [];
    signals.backlog.on((more) => behind.push(more));
    const ids = Array.from({ length: 20 }, (_, i) =>
      insertInbound(db, { chat_jid: `discord:${i}`, sender: 's', content: `m${i}` })!,
    );
    const placed = () =>
      db.prepare('SELECT count(*) FROM messages WHERE is_from_me = 0 AND state IS NOT NULL').pluck().get();
    gateway.start();
    // The first step takes one batch and asks to run again at once: a timer, so the one armed meanwhile
    // runs between the two steps.
    const seen: unknown[] = [];
    setTimeout(() => seen.push(placed()), 0);
    await vi.advanceTimersByTimeAsync(5);
    expect(seen).toEqual([7]);
    expect(placed()).toBe(20);
    expect(gateway.loop.cursor()).toBe(ids[19]);
    // Behind once (7 of 20 taken), caught up once; a step that finds the backlog gone says so.
    expect(behind).toEqual([true, false]);
    gateway.loop.tick();
    expect(behind).toEqual([true, false]);
    gateway.stop();
  });

  it('dispatches 300 chats × 2 messages inserted between two ticks exactly once', async () => {
    const { db } = freshDb();
    loadExampleRoutes(db);
    const { gateway, queue } = testGateway(db, { groups: EXAMPLE_GROUPS, batchSize: 64 });
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    const wakesBefore = queue.wakes;
    const insert = db.transaction(() => {
      for (let c = 0; c < 300; c++) {
        for (let k = 0; k < 2; k++)
          insertInbound(db, { chat_jid: `discord:${c}`, sender: 'u', content: `${c}/${k}` });
      }
    });
    insert();
    await vi.advanceTimersByTimeAsync(2000);
    const states = db
      .prepare(`SELECT state, count(*) n FROM messages WHERE is_from_me = 0 GROUP BY state`)
      .all() as { state: string; n: number }[];
    expect(states).toEqual([{ state: 'ready', n: 600 }]);
    // One more poll interval changes nothing: nothing is processed twice.
    const snapshot = db.prepare('SELECT id, state, ready_at FROM messages ORDER BY id').all();
    await vi.advanceTimersByTimeAsync(4000);
    expect(db.prepare('SELECT id, state, ready_at FROM messages ORDER BY id').all()).toEqual(snapshot);
    expect(queue.wakes).toBeGreaterThan(wakesBefore);
    gateway.stop();
  });

  it('picks up a row inserted by another connection on the next tick, not before', async () => {
    const { db, path } = freshDb();
    loadExampleRoutes(db);
    const { gateway } = testGateway(db, { groups: EXAMPLE_GROUPS });
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    const other = new Database(path);
    const id = Number(
      other.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('discord:9', 'x', 'hi')`).run()
        .lastInsertRowid,
    );
    other.close();
    await vi.advanceTimersByTimeAsync(1000);
    expect(row(db, id).state).toBeNull();
    await vi.advanceTimersByTimeAsync(1000);
    expect(row(db, id).state).toBe('ready');
    gateway.stop();
  });

  it('never sleeps on the event loop for a write lock another process holds: it tries again 2 ms later', async () => {
    const { db, path } = freshDb();
    loadExampleRoutes(db);
    const { gateway } = testGateway(db, { groups: EXAMPLE_GROUPS, pollMs: 60_000 });
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    const id = insertInbound(db, { chat_jid: 'discord:9', sender: 'x', content: 'hi' })!;
    const other = new Database(path);
    other.exec('BEGIN IMMEDIATE');
    try {
      const started = performance.now();
      gateway.loop.tick();
      // SQLite's busy handler would have slept up to the 30 s busy timeout here.
      expect(performance.now() - started).toBeLessThan(500);
      expect(row(db, id).state).toBeNull();
      expect(db.pragma('busy_timeout', { simple: true })).toBe(30_000);
      await vi.advanceTimersByTimeAsync(10);
      expect(row(db, id).state).toBeNull();
    } finally {
      other.exec('COMMIT');
      other.close();
    }
    // No wake and a poll a minute away: the retry the locked tick asked for takes the row.
    await vi.advanceTimersByTimeAsync(3);
    expect(row(db, id).state).toBe('ready');
    expect(gateway.loop.cursor()).toBe(id);
    gateway.stop();
  });

  it('wakes at once for a row stored through the in-process sink', async () => {
    const { db } = freshDb();
    loadExampleRoutes(db);
    const { gateway } = testGateway(db, { groups: EXAMPLE_GROUPS, pollMs: 60_000 });
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    const id = gateway.sink({ chat_jid: 'discord:5', sender: 'x', content: 'fast', platform_msg_id: 'p1' })!;
    await vi.advanceTimersByTimeAsync(0);
    expect(row(db, id).state).toBe('ready');
    expect(
      gateway.sink({ chat_jid: 'discord:5', sender: 'x', content: 'fast', platform_msg_id: 'p1' }),
    ).toBeNull();
    gateway.stop();
  });

  it("never takes gated's own replies as input", async () => {
    const { db } = freshDb();
    loadExampleRoutes(db);
    const { gateway } = testGateway(db, { groups: EXAMPLE_GROUPS });
    const out = insertOutbound(db, { chat_jid: 'discord:1', content: '/ping', kind: 'reply' });
    const inbound = insertInbound(db, { chat_jid: 'discord:1', sender: 'u', content: '/ping' })!;
    gateway.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(row(db, out).state).toBeNull();
    expect(row(db, inbound).state).toBe('command');
    // The /ping answer is itself an outbound row and is never answered in turn.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(answers(db, 'discord:1')).toHaveLength(2);
    gateway.stop();
  });
});
