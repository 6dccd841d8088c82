import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { dueRange } from '../core/schedule.js';
import type { Signals } from '../core/signals.js';
import { createWorker, type Worker } from '../core/worker.js';
import type { Db } from '../store/db.js';
import { whenWritable } from '../store/group-commit.js';
import { getTask, scheduleOf, TaskStore, type OpenTaskRun } from '../store/tasks.js';

/** What the scheduler needs; the clock is injectable, timers are real. */
export interface TaskSchedulerOptions {
  db: Db;
  log: Logger;
  /** IANA time zone of cron patterns. */
  tz: string;
  /** Failed runs in a row after which a task is paused. */
  maxFailures: number;
  now?: () => number;
  /**
   * Told when task rows were made ready (`queued`: the queue looks) or a notice written (`outbound`); it
   * looks at once when `tasks` fires (a task added, paused or resumed in this process, or another
   * process's commit).
   */
  signals?: Pick<Signals, 'queued' | 'outbound' | 'tasks'>;
  /** The timer fallback in ms (the poll interval): a task another process added, a firing's run that ended. */
  intervalMs?: number;
}

/**
 * Fires scheduled tasks (docs/TASKS.md). When a task is due, its inbound row, its task_runs row and its
 * next due time commit in one transaction, so a due time fires exactly once whatever happens around it
 * (kill -9 included); due times missed while gated was down are coalesced into one firing at start.
 *
 * It runs on the worker driver (core/worker.ts): each step asks to run again at the earliest due time, runs
 * at once when `tasks` fires, and at the latest after `intervalMs`. A step also follows open firings to
 * count failed runs and pause a task that keeps failing.
 */
export class TaskScheduler {
  private readonly store: TaskStore;
  private readonly now: () => number;
  private readonly worker: Worker;
  private unlisten: () => void = () => {};

  constructor(private readonly opts: TaskSchedulerOptions) {
    this.store = new TaskStore(opts.db);
    this.now = opts.now ?? Date.now;
    this.worker = createWorker({
      name: 'tasks',
      log: opts.log,
      step: () => this.step(),
      ...(opts.intervalMs ? { intervalMs: opts.intervalMs } : {}),
      now: this.now,
    });
  }

  /** Starts firing; whatever fell due while gated was down fires now. */
  start(): void {
    this.unlisten = this.opts.signals?.tasks.on(() => this.worker.wake()) ?? (() => {});
    this.worker.start();
  }

  /** Stops the timer; nothing is lost (due times are rows). */
  stop(): Promise<void> {
    this.unlisten();
    return this.worker.stop();
  }

  /**
   * One step. What it will write waits for another process's write lock off the event loop (an operator's
   * open transaction in `sqlite3` must not stop gated); a step with nothing to write (nearly every poll
   * tick) takes no lock and reads no more than these two lookups and the next due time.
   */
  private step(): number | null | Promise<number | null> {
    const writes = this.store.due(this.now()).length > 0 || this.store.openRuns().some(moved);
    return writes ? whenWritable(this.opts.db, () => this.work()) : this.store.nextDueAt();
  }

  /** Fires and follows: each half logs its own failure, so one cannot starve the other. */
  private work(): number | null {
    try {
      if (this.fireDue() > 0) this.opts.signals?.queued.fire();
    } catch (err) {
      this.opts.log.error({ err: coerceError(err).message }, 'firing due tasks failed; will retry');
    }
    try {
      if (this.followRuns() > 0) this.opts.signals?.outbound.fire(undefined);
    } catch (err) {
      this.opts.log.error({ err: coerceError(err).message }, 'following task runs failed');
    }
    return this.store.nextDueAt();
  }

  /** Fires every due task in one transaction; returns how many rows it made. */
  fireDue(): number {
    const t = this.now();
    // A read first: an idle check must not take the write lock other processes need.
    if (this.store.due(t).length === 0) return 0;
    const { db, log, tz } = this.opts;
    const fired: Array<{ task: number; row: number; due: string; count: number }> = [];
    db.transaction(() => {
      for (const task of this.store.due(t)) {
        if (!this.store.groupExists(task.group_folder)) {
          this.store.pauseWithNotice(
            task,
            `group '${task.group_folder}' is not registered`,
            `Task ${task.id} is paused: its group '${task.group_folder}' is not registered.`,
          );
          continue;
        }
        let range;
        try {
          range = dueRange(scheduleOf(task), Date.parse(task.next_run_at!), t, tz);
        } catch (err) {
          // A spec edited by hand into something unusable: paused with the reason, never a crash loop.
          const why = coerceError(err).message;
          this.store.pauseWithNotice(task, why, `Task ${task.id} is paused: ${why}`);
          continue;
        }
        const row = this.store.fire(task, range, t);
        if (row !== null)
          fired.push({ task: task.id, row, due: new Date(range.latest).toISOString(), count: range.count });
      }
    }).immediate();
    for (const f of fired) {
      log.info({ task: f.task, msgId: f.row, due: f.due, coalesced: f.count }, 'task fired');
    }
    return fired.length;
  }

  /**
   * Counts the failed runs of open firings (each retry of the task's row is one, and a row given up on is
   * one more), closes firings whose row was answered, and pauses a task once `maxFailures` runs in a row
   * failed, with one notice to its chat. Returns the number of notices written.
   */
  followRuns(): number {
    // Only firings whose runs moved on: an open firing with nothing new takes no write lock.
    const open = this.store.openRuns().filter(moved);
    if (open.length === 0) return 0;
    const { db, log, maxFailures } = this.opts;
    let notices = 0;
    db.transaction(() => {
      const touched = new Set<number>();
      for (const run of open) {
        const verdict = verdictOf(run);
        this.store.recordRun(run, verdict.outcome, verdict.seen);
        touched.add(run.task_id);
      }
      for (const id of touched) {
        const task = getTask(db, id);
        if (!task || task.status !== 'active' || task.failures < maxFailures) continue;
        const why = `${task.failures} runs in a row ended without answering it`;
        const notice =
          `Task ${task.id} is paused: its last ${task.failures} runs ended without answering it. ` +
          `Resume it with 'gated tasks resume ${task.id}' or from the dashboard.`;
        if (this.store.pauseWithNotice(task, why, notice) !== null) {
          notices += 1;
          log.warn({ task: task.id, failures: task.failures }, 'task paused after failing runs');
        }
      }
    }).immediate();
    return notices;
  }
}

/** Whether an open firing has news to record: an outcome, or more failed runs than recorded. */
function moved(run: OpenTaskRun): boolean {
  const verdict = verdictOf(run);
  return verdict.outcome !== null || verdict.seen !== run.failures_seen;
}

/**
 * How an open firing stands: its row answered (ok), stopped by an operator, given up on after retries
 * (failed), or still under way. `seen` is how many of its runs failed so far: each failed run puts the
 * row back with attempts + 1, and the run that makes the queue give up (parked) is one more.
 */
function verdictOf(run: OpenTaskRun): { outcome: 'ok' | 'failed' | 'stopped' | null; seen: number } {
  switch (run.state) {
    case 'done':
      return { outcome: 'ok', seen: run.failures_seen };
    case 'stopped':
      return { outcome: 'stopped', seen: run.failures_seen };
    case 'parked':
    case 'failed':
      return { outcome: 'failed', seen: Math.max(run.failures_seen, run.attempts + 1) };
    default:
      return { outcome: null, seen: Math.max(run.failures_seen, run.attempts) };
  }
}
