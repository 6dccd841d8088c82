import type { Logger } from '../core/log.js';
import type { Message } from '../core/types.js';
import { coerceError } from '../core/errors.js';
import { backoffDelay } from '../core/backoff.js';
import { createWorker, type Worker } from '../core/worker.js';
import type { Db } from '../store/db.js';
import type { RouteSource } from '../store/routes.js';

/** Options of the daemon dispatcher. */
export interface DaemonOptions {
  db: Db;
  routes: RouteSource;
  log: Logger;
  now?: () => number;
  /** Request timeout per POST. Default 10 s. */
  timeoutMs?: number;
  /** Backoff bounds for retries. Defaults 1 s and 5 min. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  fetch?: typeof fetch;
}

/** A `messages` row routed to a daemon, with its target and the attempts made so far. */
interface DaemonRow extends Omit<Message, 'reply_to' | 'is_from_me'> {
  target: string;
  attempts: number;
}

/**
 * Delivers messages routed to `daemon:NAME`: an HTTP POST of the message as JSON to the daemon's registered
 * URL, retried with capped exponential backoff and jitter until it answers 2xx. A 4xx other than 408/429 is
 * a permanent refusal: recorded on the row (state failed, error) and not retried. Rows stay in state
 * `daemon` until then, so a restart resumes where it stopped.
 */
export class DaemonDispatcher {
  private stopped = false;
  private readonly worker: Worker;
  private readonly now: () => number;
  private readonly dueStmt;
  private readonly doneStmt;
  private readonly retryStmt;
  private readonly failStmt;
  private readonly nextStmt;

  constructor(private readonly opts: DaemonOptions) {
    const { db } = opts;
    this.now = opts.now ?? Date.now;
    this.dueStmt = db.prepare(
      `SELECT id, chat_jid, sender, sender_name, coalesce(agent_content, content) AS content, verb, topic, platform_msg_id, timestamp, target, attempts
       FROM messages WHERE state = 'daemon' AND (not_before IS NULL OR not_before <= ?) ORDER BY id LIMIT 50`,
    );
    this.doneStmt = db.prepare(`UPDATE messages SET state = 'done', error = NULL WHERE id = ?`);
    this.retryStmt = db.prepare(
      `UPDATE messages SET attempts = attempts + 1, not_before = ?, error = ? WHERE id = ?`,
    );
    this.failStmt = db.prepare(
      `UPDATE messages SET state = 'failed', attempts = attempts + 1, error = ? WHERE id = ?`,
    );
    // The earliest time any daemon row may be sent (0: one is due now), or NULL when none waits.
    this.nextStmt = db
      .prepare(`SELECT min(coalesce(not_before, 0)) FROM messages WHERE state = 'daemon'`)
      .pluck();
    // No interval: each pass asks to run again when the earliest retry falls due.
    this.worker = createWorker({ name: 'daemons', log: opts.log, step: () => this.run(), now: this.now });
  }

  /** Sends what is due now; safe to call often. The first wake starts the dispatcher. */
  wake(): void {
    if (this.stopped) return;
    this.worker.start();
    this.worker.wake();
  }

  /** Stops retrying (rows stay pending for the next start); resolves when the send in flight ended. */
  stop(): Promise<void> {
    this.stopped = true;
    return this.worker.stop();
  }

  /** One pass over due rows; returns when the earliest row left waits until (null: none waits). */
  private async run(): Promise<number | null> {
    const rows = this.dueStmt.all(this.now()) as DaemonRow[];
    for (const row of rows) {
      if (this.stopped) break;
      await this.deliver(row);
    }
    return this.nextStmt.get() as number | null;
  }

  private async deliver(row: DaemonRow): Promise<void> {
    const name = row.target.slice('daemon:'.length);
    const url = this.opts.routes.current().daemons.get(name);
    const log = this.opts.log.child({ msgId: row.id, daemon: name, attempt: row.attempts + 1 });
    if (!url) {
      this.failStmt.run(`daemon '${name}' is not registered`, row.id);
      log.warn('daemon not registered; message kept as failed');
      return;
    }
    const { target: _t, attempts: _a, ...body } = row;
    try {
      const res = await (this.opts.fetch ?? fetch)(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.opts.timeoutMs ?? 10_000),
      });
      await res.body?.cancel();
      if (res.ok) {
        this.doneStmt.run(row.id);
        log.debug({ status: res.status }, 'daemon accepted message');
      } else if (res.status >= 400 && res.status < 500 && res.status !== 408 && res.status !== 429) {
        this.failStmt.run(`daemon answered ${res.status}`, row.id);
        log.warn({ status: res.status }, 'daemon refused message permanently');
      } else {
        this.retry(row, `daemon answered ${res.status}`);
      }
    } catch (err) {
      this.retry(row, coerceError(err).message);
    }
  }

  private retry(row: DaemonRow, error: string): void {
    const base = this.opts.baseDelayMs ?? 1000;
    const cap = this.opts.maxDelayMs ?? 300_000;
    const jittered = backoffDelay(row.attempts + 1, { baseMs: base, maxMs: cap });
    this.retryStmt.run(this.now() + jittered, error, row.id);
    this.opts.log.info(
      { msgId: row.id, attempt: row.attempts + 1, delayMs: jittered, error },
      'daemon delivery will retry',
    );
  }
}
