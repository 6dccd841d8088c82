import type { Db } from './db.js';
import { stateOf, type StateStore } from './state.js';

/**
 * Per-minute history for the dashboard's charts (table metrics_minute, docs/WEB.md "History").
 *
 * Nothing is counted per message on the hot path: once a minute `flush` derives the minute's figures from
 * the rows that already say what happened (inbound rows by id after a cursor; runs by `ended_at`; replies
 * by `delivered_at`, both through partial indexes) and writes one upsert per series and label. Rows other
 * processes wrote count like our own. Only delivery failures and retries leave no timestamped row behind,
 * so delivery reports them to `delivery()` and they wait in memory until the next flush.
 */

/** How the values of a series combine when a chart shows several minutes as one point. */
export type SeriesKind = 'count' | 'gauge' | 'percentile';

/** Every series kept, with how its values combine. Labels are listed in docs/WEB.md. */
export const SERIES: Readonly<Record<string, SeriesKind>> = {
  /**
   * Inbound messages by `platform/outcome`: routed, command, unrouted, dropped, daemon, denied, pending,
   * limited, failed.
   */
  in: 'count',
  /** Replies delivered, by platform. */
  out: 'count',
  /** Runs ended, by result. */
  runs: 'count',
  /** Run lifetime in ms (agent start → exit, its idle wait included): p50, p95, max. */
  run_ms: 'percentile',
  /** The part of a run its agent worked, in ms (its lifetime minus idle_ms): p50, p95, max. */
  work_ms: 'percentile',
  /** The part of a run its agent sat idle waiting for a follow-up, in ms: p50, p95, max. */
  idle_ms: 'percentile',
  /** Inbound message → delivered reply in ms: p50, p95, max. */
  latency_ms: 'percentile',
  /** Rows waiting, sampled at each flush: held, ready, running. */
  queue: 'gauge',
  /** Delivery attempts that failed: failed (for good), retried. */
  delivery: 'count',
  /** Agent cost in USD reported by runs (0 when agents report none). */
  cost: 'count',
};

/** Options of the history writer. */
export interface HistoryOptions {
  /** Minutes older than this many days are deleted. */
  retainDays: number;
  /** A minute is final this long after it ended (commits in flight land first). Default 5 s. */
  graceMs?: number;
  /** At most this many inbound rows are read per flush, so a backlog never blocks the loop for long. */
  inboundBatch?: number;
}

/** What one flush did (the burst benchmark prints these). */
export interface FlushStats {
  minutes: number;
  inbound: number;
  upserts: number;
  ms: number;
}

/** Series values for a chart: aligned arrays, one entry per point of `minutes`. */
export interface HistoryRange {
  /** Minutes per point. */
  step: number;
  /** Epoch minute of each point. */
  minutes: number[];
  /** series → label → values (null: no value for that point). */
  series: Record<string, Record<string, Array<number | null>>>;
}

type Mode = 'add' | 'set';
/** The values of each percentile series by minute, before they become p50, p95 and max. */
type Spans = Record<'run_ms' | 'work_ms' | 'idle_ms' | 'latency_ms', Map<number, number[]>>;
/** Figures derived but not yet written: `minute\tseries\tlabel` → value. */
type Figures = Map<string, { value: number; mode: Mode }>;

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const MINUTE_KEY = 'history_minute';
const INBOUND_KEY = 'history_inbound';
// How an inbound row's state reads once the poll has decided: every state a routed row can pass through is
// "routed", so a row counts the same whenever the minute is flushed.
const OUTCOME_SQL = `CASE
  WHEN state IN ('held', 'ready', 'running', 'done', 'stopped', 'parked') THEN 'routed'
  WHEN state IN ('command', 'unrouted', 'dropped', 'daemon') THEN state
  WHEN state = 'failed' AND target LIKE 'daemon:%' THEN 'daemon'
  ELSE coalesce(state, 'other') END`;
// Access outcomes (denied, pending, limited) and `failed` rows count under their own state: a pending or
// limited row released later stays counted as it was when its minute was flushed.

/** Nearest-rank percentile of ascending numbers. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/** Epoch minute of an ISO timestamp as gated writes them (`…Z`), or NaN. */
export function minuteOf(iso: string | null): number {
  if (!iso) return NaN;
  return Math.floor(Date.parse(iso) / MINUTE);
}

const isoOf = (ms: number) => new Date(ms).toISOString();
/** The percentile series as an SQL list: several minutes as one point keep the worst of them. */
const PERCENTILES = Object.keys(SERIES)
  .filter((name) => SERIES[name] === 'percentile')
  .map((name) => `'${name}'`)
  .join(', ');

/** Writes and reads the per-minute history. One instance per database connection. */
export class History {
  private readonly s;
  private readonly state: StateStore;
  readonly retainDays: number;
  private readonly graceMs: number;
  private readonly inboundBatch: number;
  /** Every flush so far, summed (the burst benchmark reports the write cost from these). */
  readonly totals = { flushes: 0, ms: 0, upserts: 0 };
  /** Delivery failures and retries not flushed yet: `minute\tlabel` → count. */
  private readonly deliveries = new Map<string, number>();

  constructor(
    private readonly db: Db,
    opts: HistoryOptions,
  ) {
    this.retainDays = opts.retainDays;
    this.graceMs = opts.graceMs ?? 5000;
    this.inboundBatch = opts.inboundBatch ?? 50_000;
    this.state = stateOf(db);
    this.s = {
      add: db.prepare<[number, string, string, number]>(
        `INSERT INTO metrics_minute (minute, series, label, value) VALUES (?, ?, ?, ?)
         ON CONFLICT (minute, series, label) DO UPDATE SET value = value + excluded.value`,
      ),
      set: db.prepare<[number, string, string, number]>(
        `INSERT INTO metrics_minute (minute, series, label, value) VALUES (?, ?, ?, ?)
         ON CONFLICT (minute, series, label) DO UPDATE SET value = excluded.value`,
      ),
      prune: db.prepare<[number]>(`DELETE FROM metrics_minute WHERE minute < ?`),
      inbound: db.prepare<
        [number, number, number],
        { minute: string; platform: string; outcome: string; n: number; last: number }
      >(
        `SELECT substr(timestamp, 1, 16) AS minute,
                CASE WHEN instr(chat_jid, ':') > 1 THEN substr(chat_jid, 1, instr(chat_jid, ':') - 1)
                     ELSE 'other' END AS platform,
                ${OUTCOME_SQL} AS outcome, count(*) AS n, max(id) AS last
           FROM (SELECT id, timestamp, chat_jid, state, target FROM messages
                  WHERE id > ? AND id <= ? AND is_from_me = 0 ORDER BY id LIMIT ?)
          GROUP BY 1, 2, 3`,
      ),
      runs: db.prepare<
        [string, string],
        { started_at: string; ended_at: string; result: string | null; cost: number; idle_ms: number | null }
      >(
        `SELECT started_at, ended_at, result, ${costColumn(db)} AS cost, idle_ms FROM session_log
          WHERE ended_at >= ? AND ended_at < ?`,
      ),
      replies: db.prepare<[string, string], { chat_jid: string; delivered_at: string; asked: string | null }>(
        `SELECT o.chat_jid, o.delivered_at, i.timestamp AS asked
           FROM messages o LEFT JOIN messages i ON i.id = o.reply_to_id AND o.kind = 'reply'
          WHERE o.delivered_at >= ? AND o.delivered_at < ? AND o.is_from_me = 1`,
      ),
      held: db.prepare(`SELECT count(*) FROM messages WHERE state = 'held'`).pluck(),
      ready: db.prepare(`SELECT count(*) FROM messages WHERE state = 'ready'`).pluck(),
      running: db.prepare(`SELECT count(*) FROM messages WHERE state = 'running'`).pluck(),
      range: db.prepare<
        [number, number, number, number, number],
        { m: number; series: string; label: string; value: number }
      >(
        `SELECT (minute / CAST(? AS INTEGER)) * CAST(? AS INTEGER) AS m, series, label,
                CASE WHEN series IN (${PERCENTILES}) THEN max(value)
                     WHEN series = 'queue' THEN avg(value) ELSE sum(value) END AS value
           FROM metrics_minute WHERE minute >= ? AND minute < ? GROUP BY 1, 2, 3 ORDER BY 1 LIMIT ?`,
      ),
    };
  }

  /** Counts one delivery attempt that failed (for good, or to be retried) at `now`. */
  delivery(outcome: 'failed' | 'retried', now: number): void {
    const key = `${Math.floor(now / MINUTE)}\t${outcome}`;
    this.deliveries.set(key, (this.deliveries.get(key) ?? 0) + 1);
  }

  /**
   * Writes the figures of every minute that ended (plus the grace) since the last flush, the inbound rows
   * the poll has decided since then, a queue-depth sample and the delivery counts, in one transaction; then
   * deletes minutes past retention.
   */
  flush(now: number): FlushStats {
    const t0 = performance.now();
    const stats = this.db
      .transaction(() => {
        const figures: Figures = new Map();
        const minutes = this.windows(now, figures, true);
        const inbound = this.inboundFigures(figures, true);
        this.queueSample(now, figures);
        for (const [key, n] of this.deliveries) {
          const [m, label] = key.split('\t');
          put(figures, Number(m), 'delivery', label!, n, 'add');
        }
        this.deliveries.clear();
        for (const [key, { value, mode }] of figures) {
          const [m, series, label] = key.split('\t');
          (mode === 'add' ? this.s.add : this.s.set).run(Number(m), series!, label!, value);
        }
        this.s.prune.run(Math.floor((now - this.retainDays * DAY) / MINUTE));
        return { minutes, inbound, upserts: figures.size };
      })
      .immediate();
    const ms = performance.now() - t0;
    this.totals.flushes += 1;
    this.totals.ms += ms;
    this.totals.upserts += stats.upserts;
    return { ...stats, ms: Math.round(ms * 100) / 100 };
  }

  /**
   * The series from minute `from` (inclusive) to `to` (exclusive), `step` minutes per point. With `live`,
   * what happened since the last flush is derived on the spot and included (nothing is written).
   */
  range(from: number, to: number, step: number, now: number, live = true): HistoryRange {
    const points = Math.max(1, Math.ceil((to - from) / step));
    const start = Math.floor(from / step) * step;
    const minutes = Array.from({ length: points }, (_, i) => start + i * step);
    const series: HistoryRange['series'] = {};
    const slot = (name: string, label: string) => {
      const byLabel = (series[name] ??= {});
      return (byLabel[label] ??= minutes.map(() => (SERIES[name] === 'count' ? 0 : null)));
    };
    const apply = (m: number, name: string, label: string, value: number) => {
      const i = Math.floor((m - start) / step);
      if (i < 0 || i >= points || !(name in SERIES)) return;
      const arr = slot(name, label);
      const kind = SERIES[name];
      const old = arr[i] ?? null;
      if (kind === 'count') arr[i] = (old ?? 0) + value;
      else if (kind === 'percentile') arr[i] = old === null ? value : Math.max(old, value);
      else arr[i] = value; // gauge: the newest sample of the point
    };
    const rows = this.s.range.all(step, step, start, to, 500_000);
    for (const r of rows) apply(r.m, r.series, r.label, r.value);
    if (live) {
      const figures: Figures = new Map();
      this.db.transaction(() => {
        this.windows(now, figures, false);
        this.inboundFigures(figures, false);
        this.queueSample(now, figures);
      })();
      for (const [key, n] of this.deliveries) {
        const [m, label] = key.split('\t');
        put(figures, Number(m), 'delivery', label!, n, 'add');
      }
      for (const [key, { value }] of figures) {
        const [m, name, label] = key.split('\t');
        apply(Number(m), name!, label!, value);
      }
    }
    for (const name of Object.keys(SERIES)) series[name] ??= {};
    return { step, minutes, series };
  }

  /** Runs and replies of the minutes since the cursor; `commit` moves the cursor. Returns minutes done. */
  private windows(now: number, figures: Figures, commit: boolean): number {
    const closed = Math.floor((now - this.graceMs) / MINUTE);
    const oldest = Math.floor((now - Math.min(this.retainDays * DAY, DAY)) / MINUTE);
    const stored = Number(this.state.get(MINUTE_KEY) ?? NaN);
    const from = Number.isFinite(stored) ? Math.max(stored, oldest) : oldest;
    // Live reads also cover the open minute; a flush stops at the last closed one.
    const to = commit ? closed : Math.floor(now / MINUTE) + 1;
    if (to <= from) return 0;
    const a = isoOf(from * MINUTE);
    const b = isoOf(to * MINUTE);

    const spans: Spans = { run_ms: new Map(), work_ms: new Map(), idle_ms: new Map(), latency_ms: new Map() };
    this.runFigures(a, b, figures, spans);
    for (const r of this.s.replies.all(a, b)) {
      const m = minuteOf(r.delivered_at);
      if (!Number.isFinite(m)) continue;
      const colon = r.chat_jid.indexOf(':');
      put(figures, m, 'out', colon > 0 ? r.chat_jid.slice(0, colon) : 'other', 1, 'add');
      if (r.asked) {
        const ms = Date.parse(r.delivered_at) - Date.parse(r.asked);
        if (Number.isFinite(ms)) push(spans.latency_ms, m, Math.max(0, ms));
      }
    }
    for (const [name, byMinute] of Object.entries(spans)) {
      for (const [m, values] of byMinute) {
        values.sort((x, y) => x - y);
        put(figures, m, name, 'p50', percentile(values, 50), 'set');
        put(figures, m, name, 'p95', percentile(values, 95), 'set');
        put(figures, m, name, 'max', values[values.length - 1]!, 'set');
      }
    }
    if (commit) this.state.set(MINUTE_KEY, String(to));
    return to - from;
  }

  /**
   * Runs that ended from `a` to `b`: counted by result, their cost, and how long each lived, worked and
   * sat idle (a run whose split is unknown, ended by a restart or older than idle_ms, is in run_ms only).
   */
  private runFigures(a: string, b: string, figures: Figures, spans: Spans): void {
    for (const r of this.s.runs.all(a, b)) {
      const m = minuteOf(r.ended_at);
      if (!Number.isFinite(m)) continue;
      put(figures, m, 'runs', r.result ?? 'unknown', 1, 'add');
      if (r.cost) put(figures, m, 'cost', '', r.cost, 'add');
      const ms = Date.parse(r.ended_at) - Date.parse(r.started_at);
      if (!Number.isFinite(ms)) continue;
      const lifetime = Math.max(0, ms);
      push(spans.run_ms, m, lifetime);
      if (r.idle_ms === null) continue;
      const idle = Math.min(lifetime, Math.max(0, r.idle_ms));
      push(spans.idle_ms, m, idle);
      push(spans.work_ms, m, lifetime - idle);
    }
  }

  /** Inbound rows the poll has decided since the cursor, by arrival minute, platform and outcome. */
  private inboundFigures(figures: Figures, commit: boolean): number {
    const upto = Number(this.state.get('poll_cursor') ?? 0);
    const after = Number(this.state.get(INBOUND_KEY) ?? 0);
    if (upto <= after) return 0;
    let n = 0;
    let last = after;
    for (const r of this.s.inbound.all(after, upto, this.inboundBatch)) {
      n += r.n;
      last = Math.max(last, r.last);
      const m = minuteOf(`${r.minute}:00.000Z`);
      if (Number.isFinite(m)) put(figures, m, 'in', `${r.platform}/${r.outcome}`, r.n, 'add');
    }
    if (commit) this.state.set(INBOUND_KEY, String(n < this.inboundBatch ? upto : last));
    return n;
  }

  private queueSample(now: number, figures: Figures): void {
    const m = Math.floor(now / MINUTE);
    put(figures, m, 'queue', 'held', Number(this.s.held.get()), 'set');
    put(figures, m, 'queue', 'ready', Number(this.s.ready.get()), 'set');
    put(figures, m, 'queue', 'running', Number(this.s.running.get()), 'set');
  }
}

// Agents may report their cost (a session_log column added by a later schema step); until that column
// exists every run costs 0. Looked up when the statements are prepared, after migrations have run.
function costColumn(db: Db): string {
  const cols = new Set(
    (db.prepare(`PRAGMA table_info(session_log)`).all() as { name: string }[]).map((c) => c.name),
  );
  const col = ['cost_usd', 'cost'].find((c) => cols.has(c));
  return col ? `coalesce(${col}, 0)` : '0';
}

function put(f: Figures, minute: number, series: string, label: string, value: number, mode: Mode): void {
  const key = `${minute}\t${series}\t${label}`;
  const old = f.get(key);
  f.set(key, { value: mode === 'add' && old ? old.value + value : value, mode });
}

function push(map: Map<number, number[]>, key: number, v: number): void {
  const arr = map.get(key);
  if (arr) arr.push(v);
  else map.set(key, [v]);
}
