import { describe, expect, it } from 'vitest';
import { History, minuteOf, percentile } from '../../store/history.js';
import type { Db } from '../../store/db.js';
import { freshDb } from '../helpers/db.js';

const MIN = 60_000;
// A fixed minute boundary so every row's minute is known.
const T0 = Date.parse('2026-11-20T10:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

function inbound(db: Db, chat: string, at: number, state: string | null, target: string | null = null) {
  return Number(
    db
      .prepare(
        `INSERT INTO messages (chat_jid, sender, content, timestamp, state, target) VALUES (?, 's', 'x', ?, ?, ?)`,
      )
      .run(chat, iso(at), state, target).lastInsertRowid,
  );
}

function reply(db: Db, chat: string, replyTo: number, deliveredAt: number) {
  db.prepare(
    `INSERT INTO messages (chat_jid, content, is_from_me, kind, delivery, delivered_at, reply_to_id)
     VALUES (?, 'r', 1, 'reply', 'sent', ?, ?)`,
  ).run(chat, iso(deliveredAt), replyTo);
}

function run(db: Db, start: number, end: number, result: string, idleMs: number | null = null) {
  db.prepare(
    `INSERT INTO session_log (group_folder, started_at, ended_at, result, idle_ms) VALUES ('g', ?, ?, ?, ?)`,
  ).run(iso(start), iso(end), result, idleMs);
}

const setCursor = (db: Db, id: number) =>
  db
    .prepare(
      `INSERT INTO router_state (key, value) VALUES ('poll_cursor', ?)
       ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    )
    .run(String(id));

const stored = (db: Db, series: string) =>
  db
    .prepare(`SELECT minute, label, value FROM metrics_minute WHERE series = ? ORDER BY minute, label`)
    .all(series) as { minute: number; label: string; value: number }[];

describe('per-minute history', () => {
  it('percentile is nearest-rank; minuteOf reads gated timestamps', () => {
    expect(percentile([1, 2, 3, 4], 50)).toBe(2);
    expect(percentile([1, 2, 3, 4], 95)).toBe(4);
    expect(percentile([], 50)).toBeNaN();
    expect(minuteOf('2026-11-20T10:00:59.999Z')).toBe(T0 / MIN);
    expect(minuteOf('garbage')).toBeNaN();
  });

  it('derives a closed minute from the rows: in by platform/outcome, replies and latency, runs, queue', () => {
    const { db } = freshDb();
    const a = inbound(db, 'telegram:1', T0 + 1000, 'done');
    const b = inbound(db, 'telegram:1', T0 + 2000, 'unrouted');
    const c = inbound(db, 'discord:9', T0 + 3000, 'command');
    inbound(db, 'web:demo', T0 + MIN + 10, 'ready');
    const notYetPolled = inbound(db, 'web:demo', T0 + MIN + 20, null);
    setCursor(db, notYetPolled - 1);
    reply(db, 'telegram:1', a, T0 + 1000 + 400);
    reply(db, 'telegram:1', b, T0 + 2000 + 1000);
    reply(db, 'discord:9', c, T0 + 3000 + 200);
    run(db, T0, T0 + 2500, 'ok', 2000);
    run(db, T0 + 100, T0 + 30_100, 'error', 29_000);
    // Ended by a restart: how long it worked is not known, so it counts in the lifetime only.
    run(db, T0 + 200, T0 + 40_200, 'error');

    const h = new History(db, { retainDays: 14 });
    const s = h.flush(T0 + 2 * MIN + 6000);
    expect(s.minutes).toBeGreaterThan(0);
    expect(s.inbound).toBe(4);
    const m0 = T0 / MIN;
    expect(stored(db, 'in')).toEqual([
      { minute: m0, label: 'discord/command', value: 1 },
      { minute: m0, label: 'telegram/routed', value: 1 },
      { minute: m0, label: 'telegram/unrouted', value: 1 },
      { minute: m0 + 1, label: 'web/routed', value: 1 },
    ]);
    expect(stored(db, 'out')).toEqual([
      { minute: m0, label: 'discord', value: 1 },
      { minute: m0, label: 'telegram', value: 2 },
    ]);
    expect(stored(db, 'latency_ms')).toEqual([
      { minute: m0, label: 'max', value: 1000 },
      { minute: m0, label: 'p50', value: 400 },
      { minute: m0, label: 'p95', value: 1000 },
    ]);
    expect(stored(db, 'runs').map((r) => [r.label, r.value])).toEqual([
      ['error', 2],
      ['ok', 1],
    ]);
    expect(stored(db, 'run_ms').find((r) => r.label === 'max')?.value).toBe(40_000);
    // Lifetimes 2.5 s and 30 s, of which 2 s and 29 s idle: work 0.5 s and 1 s.
    const byLabel = (series: string) => Object.fromEntries(stored(db, series).map((r) => [r.label, r.value]));
    expect(byLabel('work_ms')).toEqual({ p50: 500, p95: 1000, max: 1000 });
    expect(byLabel('idle_ms')).toEqual({ p50: 2000, p95: 29_000, max: 29_000 });
    expect(stored(db, 'queue').find((r) => r.label === 'ready')?.value).toBe(1);

    // A second flush adds only what is new: the unpolled row once the poll has decided it.
    db.prepare(`UPDATE messages SET state = 'dropped' WHERE id = ?`).run(notYetPolled);
    setCursor(db, notYetPolled);
    h.flush(T0 + 3 * MIN + 6000);
    expect(stored(db, 'in').filter((r) => r.minute === m0 + 1)).toEqual([
      { minute: m0 + 1, label: 'web/dropped', value: 1 },
      { minute: m0 + 1, label: 'web/routed', value: 1 },
    ]);
    expect(stored(db, 'out').reduce((n, r) => n + r.value, 0)).toBe(3);
  });

  it('leaves the open minute to the next flush, but a live read shows it', () => {
    const { db } = freshDb();
    const h = new History(db, { retainDays: 14 });
    h.flush(T0 + 10_000);
    run(db, T0 + 1000, T0 + 20_000, 'ok');
    h.delivery('failed', T0 + 21_000);
    h.flush(T0 + 30_000);
    expect(stored(db, 'runs')).toEqual([]);
    const live = h.range(T0 / MIN - 5, T0 / MIN + 1, 1, T0 + 30_000);
    expect(live.series.runs!.ok!.at(-1)).toBe(1);
    expect(live.series.delivery!.failed!.at(-1)).toBe(1);
    const stale = h.range(T0 / MIN - 5, T0 / MIN + 1, 1, T0 + 30_000, false);
    expect(stale.series.runs).toEqual({});
    h.flush(T0 + MIN + 6000);
    expect(stored(db, 'runs')).toEqual([{ minute: T0 / MIN, label: 'ok', value: 1 }]);
    expect(stored(db, 'delivery')).toEqual([{ minute: T0 / MIN, label: 'failed', value: 1 }]);
  });

  it('groups minutes into points by series kind, and deletes minutes past retention', () => {
    const { db } = freshDb();
    const put = db.prepare(`INSERT INTO metrics_minute (minute, series, label, value) VALUES (?, ?, ?, ?)`);
    const m0 = T0 / MIN;
    put.run(m0, 'runs', 'ok', 2);
    put.run(m0 + 1, 'runs', 'ok', 3);
    put.run(m0, 'run_ms', 'p95', 100);
    put.run(m0 + 1, 'run_ms', 'p95', 700);
    put.run(m0, 'queue', 'ready', 4);
    put.run(m0 + 1, 'queue', 'ready', 8);
    put.run(m0 - 3 * 24 * 60, 'runs', 'ok', 9);
    const h = new History(db, { retainDays: 2 });
    const r = h.range(m0, m0 + 10, 5, T0, false);
    expect(r.minutes).toEqual([m0, m0 + 5]);
    expect(r.series.runs!.ok).toEqual([5, 0]);
    expect(r.series.run_ms!.p95).toEqual([700, null]);
    expect(r.series.queue!.ready).toEqual([6, null]);
    h.flush(T0 + 10 * MIN);
    expect(db.prepare(`SELECT count(*) FROM metrics_minute WHERE minute < ?`).pluck().get(m0)).toBe(0);
  });

  it('counts a backlog in bounded batches without losing rows', () => {
    const { db } = freshDb();
    let last = 0;
    db.transaction(() => {
      for (let i = 0; i < 25; i++) last = inbound(db, 'bench:g1', T0 + i, 'done');
    })();
    setCursor(db, last);
    const h = new History(db, { retainDays: 14, inboundBatch: 10 });
    expect(h.flush(T0 + MIN).inbound).toBe(10);
    expect(h.flush(T0 + MIN).inbound).toBe(10);
    expect(h.flush(T0 + MIN).inbound).toBe(5);
    expect(h.flush(T0 + MIN).inbound).toBe(0);
    expect(stored(db, 'in')).toEqual([{ minute: T0 / MIN, label: 'bench/routed', value: 25 }]);
  });
});
