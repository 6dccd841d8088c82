import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import { dueRange } from '../core/schedule.js';
import type { Db } from '../store/db.js';
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
  /** Task rows were made ready: the queue should look. */
  onFired?: () => void;
  /** A notice row was written: delivery should look. */
  onOutbound?: () => void;
}

// setTimeout cannot wait longer than this; a farther due time is re-armed when the timer fires.
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Fires scheduled tasks (docs/TASKS.md). When a task is due, its inbound row, its task_runs row and its
 * next due time commit in one transaction, so a due time fires exactly once whatever happens around it
 * (kill -9 included); due times missed while gated was down are coalesced into one firing at start.
 *
 * No polling of its own: a timer is armed for the earliest due time, and `check()` runs on every poll
 * tick too (so a task added by another process, which wakes the loop through the commit watcher, is seen
 * at once). `check()` also follows open firings to count failed runs and pause a task that keeps failing.
 */
export class TaskScheduler {
  private readonly store: TaskStore;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private armedFor: number | null = null;
  private stopped = true;

  constructor(private readonly opts: TaskSchedulerOptions) {
    this.store = new TaskStore(opts.db);
    this.now = opts.now ?? Date.now;
  }

  /** Starts firing; whatever fell due while gated was down fires now. */
  start(): void {
    this.stopped = false;
    this.check();
  }

  /** Stops the timer; nothing is lost (due times are rows). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.armedFor = null;
  }

  /** Fires what is due, follows open firings, and re-arms the timer. Never throws. */
  check(): void {
    if (this.stopped) return;
    try {
      if (this.fireDue() > 0) this.opts.onFired?.();
    } catch (err) {
      this.opts.log.error({ err: coerceError(err).message }, 'firing due tasks failed; will retry');
    }
    try {
      if (this.followRuns() > 0) this.opts.onOutbound?.();
    } catch (err) {
      this.opts.log.error({ err: coerceError(err).message }, 'following task runs failed');
    }
    this.arm();
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
    const open = this.store.openRuns();
    if (open.length === 0) return 0;
    const { db, log, maxFailures } = this.opts;
    let notices = 0;
    db.transaction(() => {
      const touched = new Set<number>();
      for (const run of open) {
        const verdict = verdictOf(run);
        if (verdict.outcome === null && verdict.seen === run.failures_seen) continue;
        this.store.settleRun(run, verdict.outcome, verdict.seen);
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

  private arm(): void {
    if (this.stopped) return;
    const next = this.store.nextDueAt();
    if (next === this.armedFor) return;
    clearTimeout(this.timer);
    this.armedFor = next;
    if (next === null) return;
    const wait = Math.min(MAX_TIMER_MS, Math.max(0, next - this.now()));
    this.timer = setTimeout(() => {
      this.armedFor = null;
      this.check();
    }, wait);
  }
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
