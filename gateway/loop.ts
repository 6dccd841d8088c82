import type { Logger } from '../core/log.js';
import type { BatchOutcome, Pipeline } from './pipeline.js';
import type { PolledRow } from './batch.js';
import { lockOrLater, LOCKED, type Db } from '../store/db.js';
import { POLL_CURSOR_KEY, stateOf, type StateStore } from '../store/state.js';
import { turnWorkMs } from '../store/group-commit.js';
import { createWorker, type Worker } from '../core/worker.js';

/** Options of the poll loop. */
export interface PollLoopOptions {
  db: Db;
  pipeline: Pipeline;
  log: Logger;
  pollMs: number;
  /** Rows per transaction (default BATCH_SIZE); a step goes on while batches come back full, for a slice. */
  batchSize?: number;
  now?: () => number;
  /** Told after each committed batch, outside the transaction. */
  onBatch?: (outcome: BatchOutcome) => void;
  /**
   * Told when a step leaves rows for the next one (true: the backlog was larger than a slice) and when a
   * step catches up again (false); once per change.
   */
  onBacklog?: (more: boolean) => void;
  /** Milliseconds of batches a step takes before it lets the event loop run; default SLICE_MS. */
  sliceMs?: number;
  /** Seconds a tick took (metrics). */
  onTick?: (seconds: number) => void;
  /** Characters of each row's content the layers read (the stored row keeps all); default 262,144. */
  maxContentChars?: number;
  /** Longest wait between retries while ticks keep failing (disk full, I/O errors); default 30 s. */
  maxBackoffMs?: number;
  /**
   * Transcription is on (docs/VOICE.md): each step also takes the rows the transcriber finished. Off, the
   * loop never looks for them.
   */
  transcribed?: boolean;
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

const CURSOR_KEY = POLL_CURSOR_KEY;
/** When a tick found the write lock held by another process, the next try, in ms (its commit wakes too). */
const LOCKED_RETRY_MS = 2;
/**
 * Rows per batch transaction. A batch is one piece of work on the event loop (250 rows: about 7 ms of CPU,
 * measured on a shared 2-core machine); 250 cost the same per row as 500, 100 a quarter more (each batch's
 * own statements and commit).
 */
export const BATCH_SIZE = 250;
/**
 * A step takes batches for at most about this long (ms): it starts another only when the last one would
 * still fit. Then it returns and runs again at once, so timers, I/O, /healthz and the scheduler run between
 * two slices of a large backlog instead of after all of it.
 */
export const SLICE_MS = 8;

/**
 * The poll loop. Every `pollMs` (and at once after `wake()`) it reads inbound rows after an integer cursor,
 * the messages id, in bounded batches. Each batch is processed and the cursor advanced in ONE transaction,
 * so a row is never passed unprocessed and never processed twice. SQLite admits one writer at a time and
 * assigns ids inside the writer's transaction, so ids become visible in increasing order: a cursor on id
 * cannot skip a row that commits late, unlike a timestamp cursor. Rows gated writes itself (is_from_me = 1)
 * never enter the loop, nor inbound rows gated placed in a session itself (a task firing, a delegation:
 * they are stored with their state already set and skip the layers).
 *
 * It runs on the worker driver (core/worker.ts): a failing tick (disk full, I/O errors) backs off from the
 * poll interval doubling up to `maxBackoffMs`, and wakes wait for it, so the commit watcher's wake cannot
 * turn a full disk into a busy loop.
 */
export class PollLoop {
  private readonly readStmt;
  private readonly peekStmt;
  private readonly state: StateStore;
  private readonly now: () => number;
  private readonly batchSize: number;
  private readonly sliceNs: bigint;
  private readonly worker: Worker;
  /** The last step left rows after the cursor for the next one. */
  private behind = false;
  /**
   * One batch in its transaction, made once (better-sqlite3 builds four wrappers per transaction()); it
   * gives up, LOCKED, when another process holds the write lock.
   */
  private readonly batchTx: (cursor: number) => { count: number; outcome?: BatchOutcome } | typeof LOCKED;
  private readonly releaseTx: (now: number) => number | typeof LOCKED;
  private readonly transcribedStmt;
  private readonly transcribedPeek;
  private readonly transcribedTx: () => BatchOutcome | undefined | typeof LOCKED;

  constructor(private readonly opts: PollLoopOptions) {
    const { db } = opts;
    this.now = opts.now ?? Date.now;
    this.batchSize = opts.batchSize ?? BATCH_SIZE;
    this.sliceNs = BigInt(Math.round((opts.sliceMs ?? SLICE_MS) * 1e6));
    // The layers only look at the start of a message and the agent gets a bounded part of it: a 30 MB row
    // is not read whole into memory here.
    const maxChars = Math.max(1, Math.floor(opts.maxContentChars ?? 256 * 1024));
    // Each row comes with its chat's sticky state, so the sticky step reads no row of its own.
    const rows = `SELECT m.id, m.chat_jid, m.sender, m.sender_name, substr(m.content, 1, ${maxChars}) AS content,
              m.verb, m.topic, m.platform_msg_id, m.reply_to, m.timestamp, m.is_from_me, m.sender_auth,
              m.platform_role, m.audio, m.transcript, m.not_before IS NOT NULL AS waits_files,
              c.sticky_group AS sticky_group,
              c.sticky_topic AS sticky_topic
       FROM messages m LEFT JOIN chat_state c ON c.chat_jid = m.chat_jid`;
    this.readStmt = db.prepare(
      `${rows} WHERE m.is_from_me = 0 AND m.id > ? AND m.state IS NULL ORDER BY m.id LIMIT ?`,
    );
    // Rows the transcriber finished lie behind the cursor: taken by their state (an index of almost none).
    this.transcribedStmt = db.prepare(
      `${rows} WHERE m.state = 'transcribed' AND m.is_from_me = 0 ORDER BY m.id LIMIT ?`,
    );
    this.transcribedPeek = db
      .prepare(`SELECT 1 FROM messages WHERE state = 'transcribed' AND is_from_me = 0 LIMIT 1`)
      .pluck();
    this.transcribedTx = lockOrLater(db, (): BatchOutcome | undefined => {
      const rows = this.transcribedStmt.all(this.batchSize) as PolledRow[];
      return rows.length ? opts.pipeline.process(rows, this.now()) : undefined;
    });
    this.peekStmt = db
      .prepare('SELECT 1 FROM messages WHERE is_from_me = 0 AND id > ? AND state IS NULL LIMIT 1')
      .pluck();
    this.state = stateOf(db);
    // Both write, and both can wait for the next tick: the rows stay after the cursor, the held chats held.
    this.batchTx = lockOrLater(db, (cursor: number): { count: number; outcome?: BatchOutcome } => {
      const rows = this.readStmt.all(cursor, this.batchSize) as PolledRow[];
      if (!rows.length) return { count: 0 };
      const outcome = opts.pipeline.process(rows, this.now());
      this.state.set(CURSOR_KEY, String(rows[rows.length - 1]!.id));
      return { count: rows.length, outcome };
    });
    this.releaseTx = lockOrLater(db, (now: number) => opts.pipeline.gate.releaseDue(now));
    this.worker = createWorker({
      name: 'poll loop',
      log: opts.log,
      step: () => this.step(),
      intervalMs: opts.pollMs,
      backoff: { baseMs: opts.pollMs, maxMs: opts.maxBackoffMs ?? 30_000 },
      now: this.now,
    });
  }

  /** The persisted cursor: the id of the last processed inbound row (0 on a fresh database). */
  cursor(): number {
    return Number(this.state.get(CURSOR_KEY) ?? 0);
  }

  /** Starts polling; the first tick runs at once, so rows stored while gated was down are taken now. */
  start(): void {
    this.worker.start();
  }

  /** Stops polling; a tick in progress finishes its batch (it is synchronous). */
  stop(): Promise<void> {
    return this.worker.stop();
  }

  /** Health of the loop for /healthz. */
  health(): LoopHealth {
    const h = this.worker.health();
    return { lastTickAt: h.lastOkAt, failing: h.failing, failures: h.failures };
  }

  /** Runs a tick as soon as possible (an in-process adapter stored a row); coalesces bursts. */
  wake(): void {
    this.worker.wake();
  }

  /**
   * Processes the rows after the cursor (and releases chats whose maximum hold passed) now, up to a slice
   * of them: a larger backlog goes on in the steps the driver runs next. Synchronous: the database calls
   * are, so a tick is never interleaved with another.
   */
  tick(): void {
    this.worker.runNow();
  }

  /**
   * One tick: chats whose maximum hold passed, then batches for about a slice (SLICE_MS). It returns when
   * the earliest held chat must be released (the max-hold fires without rows); now, when the backlog was
   * larger than a slice (the driver runs the step again once the event loop had its turn); or a few ms
   * from now when another process held the write lock: the event loop never sleeps waiting for it.
   */
  private step(): number | undefined {
    const started = process.hrtime.bigint();
    // What this turn already wrote before the step (a reply, a run started) counts against the slice.
    const sliceStart = started - BigInt(Math.round(turnWorkMs(this.opts.db) * 1e6));
    let locked = false;
    let more = false;
    try {
      locked = this.releaseDue() === LOCKED;
      if (this.opts.transcribed && this.transcribedBatch() === LOCKED) locked = true;
      let n: number | typeof LOCKED;
      let from = process.hrtime.bigint();
      while ((n = this.batch()) === this.batchSize) {
        const at = process.hrtime.bigint();
        // Another batch only if one more like the last still ends within the slice.
        if (at - sliceStart + (at - from) < this.sliceNs) {
          from = at;
          continue;
        }
        more = true;
        break;
      }
      if (n === LOCKED) locked = true;
      // A failing batch rolled back and throws: its rows stay after the cursor and are taken again after
      // the driver's backoff.
    } finally {
      this.opts.onTick?.(Number(process.hrtime.bigint() - started) / 1e9);
      // A step that threw is not behind: the scheduler must not wait for rows it cannot take now.
      this.setBehind(more);
    }
    if (more) return this.now();
    const due = this.opts.pipeline.gate.nextDue();
    if (!locked) return due;
    const retry = this.now() + LOCKED_RETRY_MS;
    return due === undefined ? retry : Math.min(due, retry);
  }

  /** Tells onBacklog when the loop falls behind by more than a slice, and when it has caught up. */
  private setBehind(more: boolean): void {
    if (more === this.behind) return;
    this.behind = more;
    this.opts.onBacklog?.(more);
  }

  private batch(): number | typeof LOCKED {
    // A read first: an idle tick must not take the write lock other processes (adapters, sqlite3) need.
    // One gated owns the database (gated/owner.ts), so the cursor cannot move between this read and the
    // transaction below.
    const cursor = this.cursor();
    if (this.peekStmt.get(cursor) === undefined) return 0;
    const done = this.batchTx(cursor);
    if (done === LOCKED) return LOCKED;
    if (done.outcome) this.opts.onBatch?.(done.outcome);
    return done.count;
  }

  /** The rows the transcriber finished since the last step (at most a batch), through the pipeline. */
  private transcribedBatch(): void | typeof LOCKED {
    // A read first, as for the cursor's rows: an idle step takes no write lock.
    if (this.transcribedPeek.get() === undefined) return;
    const done = this.transcribedTx();
    if (done === LOCKED) return LOCKED;
    if (done) this.opts.onBatch?.(done);
  }

  private releaseDue(): void | typeof LOCKED {
    const due = this.opts.pipeline.gate.nextDue();
    if (due === undefined || due > this.now()) return;
    const released = this.releaseTx(this.now());
    if (released === LOCKED) return LOCKED;
    if (released) this.opts.onBatch?.({ released, outbound: 0, daemon: 0, decided: 0, effects: [] });
  }
}
