import { clearImmediate, setImmediate, setTimeout as realTimeout } from 'node:timers';
import type Database from 'better-sqlite3';
import type { Logger } from '../core/log.js';

/**
 * Group commit (docs/QUEUE.md "Group commit"): the small writes of one turn of the event loop share one
 * write transaction on gated's connection, committed at the end of that turn, so that N commits become one
 * and a page dirtied by many of them is written to the WAL once.
 *
 * A hot write site calls `join()` before its transaction function: the first one of a turn opens the group
 * (BEGIN IMMEDIATE) and schedules its COMMIT with setImmediate; better-sqlite3 runs every transaction
 * function called while a transaction is open as a savepoint, so a write that throws still rolls back alone.
 * Every other write on the connection in that turn joins the group too (it is the connection's transaction),
 * and reads on the connection see the group's rows, so in-memory state and rows agree all along. What the
 * outside world is told must wait for the COMMIT: `committed()` before a platform send based on rows,
 * `flush()` after storing something a platform was told about (an accepted part, an inbound row it will
 * not send again).
 *
 * The timers come from node:timers, not the globals: a test's fake clock must not hold a commit back.
 */

type Connection = Database.Database;

/** What a group commit is told. */
export interface GroupCommitOptions {
  /**
   * The group's COMMIT failed (disk full, an I/O error), or SQLite rolled the group back on an error before
   * it: the writes of the turn are gone while their callers went on as if they were stored. Called once,
   * after the rollback. gated logs it and exits, so that a restart's recovery redoes the work.
   */
  onFailed(err: Error): void;
}

/** One connection's group: at most one open at a time, committed at the end of the turn that opened it. */
export class GroupCommit {
  /** The group's transaction is open (the connection's transaction is ours, not a transaction function's). */
  private open = false;
  private closed = false;
  private pending: NodeJS.Immediate | undefined;
  /** performance.now() when the open group began: about when this turn's work began. */
  private openedAt = 0;
  private waiters: Array<{ resolve: () => void; reject: (err: Error) => void }> = [];
  private readonly begin;
  private readonly commit;
  private readonly rollback;
  private readonly busyTimeout;
  /** PRAGMA busy_timeout = N, prepared once per N (a pragma() call prepares its statement every time). */
  private readonly timeouts = new Map<number, Database.Statement>();
  /**
   * The connection's own busy timeout, read at the first tryJoin: it is set when the connection opens
   * (store/db.ts) and changed only for a moment by tryJoin and lockOrLater, which both put it back. Read at
   * every tryJoin it was a third statement around each BEGIN (two a run in a burst).
   */
  private fullTimeout: number | undefined;
  /** Groups committed so far (the bench and tests read it). */
  commits = 0;

  constructor(
    private readonly db: Connection,
    private readonly opts: GroupCommitOptions,
  ) {
    this.begin = db.prepare('BEGIN IMMEDIATE');
    this.commit = db.prepare('COMMIT');
    this.rollback = db.prepare('ROLLBACK');
    this.busyTimeout = db.prepare('PRAGMA busy_timeout').pluck();
  }

  /** A group is open: writes made now commit at the end of this turn. */
  get isOpen(): boolean {
    return this.open;
  }

  /**
   * Milliseconds since the open group began (0 when none is open): the work this turn has done since its
   * first write, which the sliced stages (the poll loop, the scheduler's pump) count against their slice.
   */
  get ageMs(): number {
    return this.open ? performance.now() - this.openedAt : 0;
  }

  /**
   * Opens the turn's group unless one is open. Waits for another process's write lock as any write does
   * (the connection's busy timeout). Inside a transaction function's own transaction it does nothing: that
   * transaction commits itself.
   */
  join(): void {
    this.checkAlive();
    if (this.open || this.closed || this.db.inTransaction) return;
    this.begin.run();
    this.opened();
  }

  /**
   * As `join`, but waits at most `waitMs` for another process's write lock: false when that process held it
   * longer (nothing was opened; the caller tries again later), true otherwise.
   */
  tryJoin(waitMs: number): boolean {
    this.checkAlive();
    if (this.open || this.closed || this.db.inTransaction) return true;
    const full = (this.fullTimeout ??= this.busyTimeout.get() as number);
    if (full !== waitMs) this.setBusyTimeout(waitMs);
    try {
      this.begin.run();
    } catch (err) {
      if (String((err as { code?: unknown }).code).startsWith('SQLITE_BUSY')) return false;
      throw err;
    } finally {
      if (full !== waitMs) this.setBusyTimeout(full);
    }
    this.opened();
    return true;
  }

  /**
   * Commits the open group now (nothing when none is open). Never call it from inside a transaction
   * function: it would commit that function's savepoint half done.
   */
  flush(): void {
    if (!this.open) return;
    clearImmediate(this.pending);
    this.pending = undefined;
    this.open = false;
    const waiters = this.waiters;
    this.waiters = [];
    if (!this.db.inTransaction) return this.failed(rolledBack(), waiters);
    try {
      this.commit.run();
    } catch (err) {
      if (this.db.inTransaction) this.rollback.run();
      return this.failed(err instanceof Error ? err : new Error(String(err)), waiters);
    }
    this.commits += 1;
    for (const w of waiters) w.resolve();
  }

  /**
   * Resolves once what was written so far is committed: undefined when no group is open (it is already),
   * else a promise of the group's COMMIT, rejected with its error when it fails.
   */
  committed(): Promise<void> | undefined {
    if (!this.open) return undefined;
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }

  /** Commits the open group and opens no other: writes after this commit on their own. Idempotent. */
  close(): void {
    this.flush();
    this.closed = true;
  }

  private setBusyTimeout(ms: number): void {
    let st = this.timeouts.get(ms);
    if (!st) this.timeouts.set(ms, (st = this.db.prepare(`PRAGMA busy_timeout = ${Math.trunc(ms)}`)));
    st.run();
  }

  private opened(): void {
    this.open = true;
    this.openedAt = performance.now();
    this.pending = setImmediate(() => this.flush());
  }

  /** SQLite rolled the open group back on an error of some statement (a full disk can): that is a failure. */
  private checkAlive(): void {
    if (this.open && !this.db.inTransaction) this.flush();
  }

  private failed(err: Error, waiters: GroupCommit['waiters']): void {
    for (const w of waiters) w.reject(err);
    this.opts.onFailed(err);
  }
}

function rolledBack(): Error {
  return new Error('the group of writes was rolled back by SQLite before its COMMIT');
}

const groups = new WeakMap<Connection, GroupCommit>();

/** Turns group commit on for `db` (gated's connection); the other stores find it through the connection. */
export function startGroupCommit(db: Connection, opts: GroupCommitOptions): GroupCommit {
  const existing = groups.get(db);
  if (existing) return existing;
  const group = new GroupCommit(db, opts);
  groups.set(db, group);
  return group;
}

/** The group commit of `db`, when it was started. */
export function groupCommitOf(db: Connection): GroupCommit | undefined {
  return groups.get(db);
}

/** Joins the turn's group on `db` (no-op without group commit): call before a hot write's transaction. */
export function joinGroup(db: Connection): void {
  groups.get(db)?.join();
}

/**
 * `db.transaction(fn)` that first joins the turn's group when `db` runs one: the transaction is then a
 * savepoint of the group and commits with it. Made once, like any transaction function.
 */
export function grouped<A extends unknown[], T>(db: Connection, fn: (...args: A) => T): (...args: A) => T {
  const tx = db.transaction(fn);
  return (...args: A) => {
    groups.get(db)?.join();
    return tx(...args);
  };
}

/**
 * How long this turn has been writing on `db`, in ms: the age of its open group (0 without one, or without
 * group commit). A stage that works in slices counts it, so that the slices of the poll loop, the pump and
 * whatever else ran in the turn add up to about one slice, not one each.
 */
export function turnWorkMs(db: Connection): number {
  return groups.get(db)?.ageMs ?? 0;
}

/** Commits `db`'s open group now (no-op without one): after storing what a platform was told about. */
export function flushGroup(db: Connection): void {
  groups.get(db)?.flush();
}

/** Resolves once `db`'s writes so far are committed; undefined when they are (no group open). */
export function committed(db: Connection): Promise<void> | undefined {
  return groups.get(db)?.committed();
}

/** A write that found another process's write lock held tries again after this, in ms (docs/QUEUE.md). */
export const LOCK_RETRY_MS = 2;

/**
 * Whether a write on `db` can begin now without waiting for another process's write lock: true when it
 * can (the turn's group is open then, and a write made synchronously right after joins it; always true
 * without group commit), else a promise that resolves once it can, after tries LOCK_RETRY_MS apart. The
 * event loop never sleeps in SQLite's busy handler for it. The retries run on node:timers' own clock: a
 * test's fake clock must not hold them back.
 */
export function writableNow(db: Connection): true | Promise<void> {
  const group = groups.get(db);
  if (!group || group.tryJoin(0)) return true;
  return (async () => {
    do await new Promise<void>((r) => realTimeout(r, LOCK_RETRY_MS));
    while (!group.tryJoin(0));
  })();
}

/**
 * Runs the write `fn` on `db` once the write lock can be had without the event loop waiting for it in
 * SQLite's busy handler: at once (synchronously) when it can, else after `writableNow`'s tries, joining the
 * group again right before `fn` (a group committed in between is opened anew, or waited for again).
 * Resolves with what `fn` returned, rejects with what it threw.
 */
export function whenWritable<T>(db: Connection, fn: () => T): Promise<T> {
  try {
    const now = writableNow(db);
    if (now === true) return Promise.resolve(fn());
    return now.then(() => (groups.get(db)?.tryJoin(0) === false ? whenWritable(db, fn) : fn()));
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

/**
 * Writes in the order they were asked for, each made as `whenWritable` makes it: one asked for while an
 * earlier one still waits for the lock goes after it, so that rows keep their arrival order (an inbound
 * message's id is its place in the chat).
 */
export class OrderedWrites {
  private tail: Promise<unknown> | undefined;

  constructor(private readonly db: Connection) {}

  run<T>(fn: () => T): Promise<T> {
    const p = this.tail ? this.tail.then(() => whenWritable(this.db, fn)) : whenWritable(this.db, fn);
    const settled = p.then(
      () => undefined,
      () => undefined,
    );
    this.tail = settled;
    void settled.then(() => {
      if (this.tail === settled) this.tail = undefined;
    });
    return p;
  }
}

/**
 * Runs the write `fn` on `db` every `ms`, each as `whenWritable` makes it: while another process holds the
 * write lock the event loop goes on, and a period whose write still waits is skipped. A failed write goes
 * to `onError` and the next period tries again. The timer does not keep the process alive.
 */
export function writeEvery(
  db: Connection,
  ms: number,
  fn: () => unknown,
  onError: (err: unknown) => void,
): NodeJS.Timeout {
  let waiting = false;
  const timer = setInterval(() => {
    if (waiting) return;
    waiting = true;
    whenWritable(db, fn)
      .catch(onError)
      .finally(() => (waiting = false));
  }, ms);
  timer.unref();
  return timer;
}

/** gated's exit status after a failed group commit (EX_IOERR). */
export const EXIT_COMMIT_FAILED = 74;

/**
 * What gated does when a group's COMMIT failed (disk full, an I/O error): the turn's writes are rolled back
 * while the parts that made them went on as if they were stored (a run started, a block answered). No part
 * can be told to take it back, so gated stops at once, as a kill would, and the restart's recovery redoes
 * that work from the rows (docs/QUEUE.md "Group commit"). The supervisor (systemd, docker) restarts it.
 */
export function exitOnCommitFailure(log: Logger): (err: Error) => void {
  return (err) => {
    log.fatal({ err: err.message }, 'a group commit failed; exiting so that a restart redoes its work');
    // The logger may write through a worker that an exit cuts short: the reason also goes out directly.
    process.stderr.write(`gated: a group commit failed (${err.message}); exiting\n`);
    process.exit(EXIT_COMMIT_FAILED);
  };
}
