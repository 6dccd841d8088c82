import type { Logger } from '../core/log.js';
import type { Message } from '../core/types.js';
import type { BatchOutcome, Pipeline } from './pipeline.js';
import type { Db } from '../store/db.js';
import { stateOf, type StateStore } from '../store/state.js';

/** Options of the poll loop. */
export interface PollLoopOptions {
  db: Db;
  pipeline: Pipeline;
  log: Logger;
  pollMs: number;
  /** Rows per transaction; a tick keeps going while batches come back full. */
  batchSize?: number;
  now?: () => number;
  /** Told after each committed batch, outside the transaction. */
  onBatch?: (outcome: BatchOutcome) => void;
  /** Seconds a tick took (metrics). */
  onTick?: (seconds: number) => void;
  /** Characters of each row's content the layers read (the stored row keeps all); default 262,144. */
  maxContentChars?: number;
  /** Longest wait between retries while ticks keep failing (disk full, I/O errors); default 30 s. */
  maxBackoffMs?: number;
}

/** What /healthz needs to know about the loop. */
export interface LoopHealth {
  /** Epoch ms when the last tick completed without an error (the start time before the first). */
  lastTickAt: number;
  /** The error of the last tick when it failed, else undefined. */
  failing: string | undefined;
  /** Ticks failed in a row. */
  failures: number;
}

/** Minimum time between two warnings about a failing loop. */
const WARN_EVERY_MS = 60_000;

const CURSOR_KEY = 'poll_cursor';

/**
 * The poll loop. Every `pollMs` (and at once after `wake()`) it reads inbound rows after an integer cursor,
 * the messages id, in bounded batches. Each batch is processed and the cursor advanced in ONE transaction,
 * so a row is never passed unprocessed and never processed twice. SQLite admits one writer at a time and
 * assigns ids inside the writer's transaction, so ids become visible in increasing order: a cursor on id
 * cannot skip a row that commits late, unlike a timestamp cursor. Rows gated writes itself (is_from_me = 1)
 * never enter the loop, nor inbound rows gated placed in a session itself (a task firing, a delegation:
 * they are stored with their state already set and skip the layers).
 */
export class PollLoop {
  private timer: NodeJS.Timeout | undefined;
  private holdTimer: NodeJS.Timeout | undefined;
  private running = false;
  private pending = false;
  private stopped = true;
  private readonly readStmt;
  private readonly peekStmt;
  private readonly state: StateStore;
  private readonly now: () => number;
  private readonly batchSize: number;
  private lastTickAt: number;
  private failing: string | undefined;
  private failures = 0;
  private backoffUntil = 0;
  private lastWarnAt = -Infinity;
  private failedSinceWarn = 0;

  constructor(private readonly opts: PollLoopOptions) {
    const { db } = opts;
    this.now = opts.now ?? Date.now;
    this.batchSize = opts.batchSize ?? 500;
    this.lastTickAt = this.now();
    // The layers only look at the start of a message and the agent gets a bounded part of it: a 30 MB row
    // is not read whole into memory here.
    const maxChars = Math.max(1, Math.floor(opts.maxContentChars ?? 256 * 1024));
    this.readStmt = db.prepare(
      `SELECT id, chat_jid, sender, sender_name, substr(content, 1, ${maxChars}) AS content, verb, topic,
              platform_msg_id, reply_to, timestamp, is_from_me
       FROM messages WHERE is_from_me = 0 AND id > ? AND state IS NULL ORDER BY id LIMIT ?`,
    );
    this.peekStmt = db
      .prepare('SELECT 1 FROM messages WHERE is_from_me = 0 AND id > ? AND state IS NULL LIMIT 1')
      .pluck();
    this.state = stateOf(db);
  }

  /** The persisted cursor: the id of the last processed inbound row (0 on a fresh database). */
  cursor(): number {
    return Number(this.state.get(CURSOR_KEY) ?? 0);
  }

  /** Starts polling; the first tick runs at once, so rows stored while gated was down are taken now. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.wake();
  }

  /** Stops polling; a tick in progress finishes its batch (it is synchronous). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.holdTimer);
  }

  /** Health of the loop for /healthz. */
  health(): LoopHealth {
    return { lastTickAt: this.lastTickAt, failing: this.failing, failures: this.failures };
  }

  /**
   * Runs a tick as soon as possible (an in-process adapter stored a row); coalesces bursts. While ticks
   * fail, wakes wait for the backoff: a failed write still touches the WAL file, and the commit watcher's
   * wake must not turn a full disk into a busy loop.
   */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.pending = true;
      return;
    }
    if (this.failures > 0 && this.now() < this.backoffUntil) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.tick(), 0);
  }

  /**
   * Processes every row after the cursor (and releases chats whose maximum hold passed). Synchronous: the
   * database calls are, so a tick is never interleaved with another.
   */
  tick(): void {
    if (this.running) return;
    this.running = true;
    const started = process.hrtime.bigint();
    try {
      do {
        this.pending = false;
        this.releaseDue();
        while (this.batch() === this.batchSize);
      } while (this.pending);
      this.recovered();
    } catch (err) {
      // A failing batch rolled back: its rows stay after the cursor and are taken again after a backoff.
      this.failed(err);
    } finally {
      this.running = false;
      this.opts.onTick?.(Number(process.hrtime.bigint() - started) / 1e9);
      this.schedule();
    }
  }

  private recovered(): void {
    if (this.failures > 0) {
      this.opts.log.warn({ failedTicks: this.failures }, 'poll loop works again');
    }
    this.failures = 0;
    this.failing = undefined;
    this.failedSinceWarn = 0;
    this.lastTickAt = this.now();
  }

  /** Backs off (doubling from the poll interval up to the cap) and warns at most once a minute. */
  private failed(err: unknown): void {
    const e = err as { code?: unknown; message?: unknown };
    const text = `${typeof e.code === 'string' ? e.code + ': ' : ''}${String(e.message ?? err)}`;
    this.failures += 1;
    this.failedSinceWarn += 1;
    this.failing = text.slice(0, 500);
    const cap = this.opts.maxBackoffMs ?? 30_000;
    const delay = Math.min(cap, this.opts.pollMs * 2 ** Math.min(this.failures - 1, 16));
    this.backoffUntil = this.now() + delay;
    const t = this.now();
    if (t - this.lastWarnAt >= WARN_EVERY_MS) {
      this.lastWarnAt = t;
      this.opts.log.error(
        { err: this.failing, failedTicks: this.failedSinceWarn, retryInMs: delay },
        'poll tick failed; backing off and retrying',
      );
      this.failedSinceWarn = 0;
    }
  }

  private batch(): number {
    const { db, pipeline } = this.opts;
    // A read first: an idle tick must not take the write lock other processes (adapters, sqlite3) need.
    // One gated owns the database (gated/owner.ts), so the cursor cannot move between this read and the
    // transaction below.
    const cursor = this.cursor();
    if (this.peekStmt.get(cursor) === undefined) return 0;
    let count = 0;
    const outcome = db
      .transaction(() => {
        const rows = this.readStmt.all(cursor, this.batchSize) as Message[];
        count = rows.length;
        if (!rows.length) return undefined;
        const result = pipeline.process(rows, this.now());
        this.state.set(CURSOR_KEY, String(rows[rows.length - 1]!.id));
        return result;
      })
      .immediate();
    if (outcome) this.opts.onBatch?.(outcome);
    return count;
  }

  private releaseDue(): void {
    const { db, pipeline } = this.opts;
    const due = pipeline.gate.nextDue();
    if (due === undefined || due > this.now()) return;
    const released = db.transaction(() => pipeline.gate.releaseDue(this.now())).immediate();
    if (released) this.opts.onBatch?.({ released, outbound: 0, daemon: 0, effects: [] });
  }

  private schedule(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    clearTimeout(this.holdTimer);
    if (this.failures > 0) {
      this.pending = false;
      this.timer = setTimeout(() => this.tick(), Math.max(0, this.backoffUntil - this.now()));
      return;
    }
    this.timer = setTimeout(() => this.tick(), this.pending ? 0 : this.opts.pollMs);
    // The max-hold release must fire even when no new message arrives and the poll interval is long.
    let due: number | undefined;
    try {
      due = this.opts.pipeline.gate.nextDue();
    } catch {
      // The database failing here fails the next tick too, which reports it and backs off.
    }
    if (due !== undefined) {
      this.holdTimer = setTimeout(() => this.tick(), Math.max(0, due - this.now()));
    }
  }
}
