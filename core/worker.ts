import { backoffDelay, type BackoffOptions } from './backoff.js';
import { coerceError } from './errors.js';
import type { Logger } from './log.js';

/**
 * The one driver of a background worker (the poll loop, delivery's scan, the drafts' pacer, the inbox, the
 * tool approvals' checker, tasks, daemons). A worker is a `step` run again and again, never two at once: at
 * once after `wake()` (many wakes while a step runs coalesce into one more step), at the latest after
 * `intervalMs` (the timer fallback that finds work no wake announced, such as rows another process wrote),
 * or at the time the last step asked for. A step that throws is retried after the one backoff of
 * core/backoff.ts, and wakes wait for it: a failing disk must not become a busy loop. `stop()` resolves
 * once the step in flight has ended.
 */

/**
 * What a step returns: the epoch ms at which it wants to run again by itself (a retry, a hold that ends,
 * a task that falls due), or nothing when only wakes and the interval should run it.
 */
export type StepResult = number | null | undefined | void;

/** A worker's step; `signal` aborts when the worker stops (long waits inside the step end early). */
export type Step = (signal: AbortSignal) => StepResult | Promise<StepResult>;

/** How a worker runs. */
export interface WorkerOptions {
  /** Names the worker in its log lines. */
  name: string;
  log: Logger;
  step: Step;
  /** The timer fallback: a step runs at least this often, in ms. 0 or absent: only on wakes and due times. */
  intervalMs?: number;
  /** Spacing of retries while steps keep failing. Default base = intervalMs (or 1 s), max 30 s, no jitter. */
  backoff?: BackoffOptions;
  /** False when the worker's timer alone must not keep the process alive. Default true. */
  keepAlive?: boolean;
  now?: () => number;
}

/** What /healthz and the logs know about a worker. */
export interface WorkerHealth {
  /** Epoch ms when the last step ended without an error (the creation time before the first). */
  lastOkAt: number;
  /** The error of the last step when it failed, else undefined. */
  failing: string | undefined;
  /** Steps failed in a row. */
  failures: number;
}

/** A running (or stopped) worker. */
export interface Worker {
  /** Starts the worker; its first step runs at once. */
  start(): void;
  /** Runs a step as soon as possible; coalesced with a step in flight, ignored while backing off. */
  wake(): void;
  /**
   * Runs one step now, even before start() (tests, the benchmark, callers that need the step done when
   * this returns; a synchronous step is). Does nothing while a step runs, except ask for one more.
   */
  runNow(): void;
  /** Ends the worker: no step starts after this; resolves when the step in flight has ended. */
  stop(): Promise<void>;
  health(): WorkerHealth;
}

// setTimeout cannot wait longer than this; a farther time is re-armed when the timer fires.
const MAX_TIMER_MS = 2 ** 31 - 1;
/** Minimum time between two warnings about a failing worker. */
const WARN_EVERY_MS = 60_000;

/** Makes a worker; nothing runs until start() (or runNow()). */
export function createWorker(opts: WorkerOptions): Worker {
  const now = opts.now ?? Date.now;
  const interval = opts.intervalMs ?? 0;
  const backoff: BackoffOptions = {
    baseMs: interval || 1000,
    maxMs: 30_000,
    random: () => 1,
    ...opts.backoff,
  };
  let started = false;
  let stopped = false;
  let running = false;
  let pending = false;
  let timer: NodeJS.Timeout | undefined;
  let inflight: Promise<void> = Promise.resolve();
  const abort = new AbortController();
  const health: WorkerHealth = { lastOkAt: now(), failing: undefined, failures: 0 };
  let backoffUntil = 0;
  let lastWarnAt = -Infinity;
  let failedSinceWarn = 0;

  const arm = (at: number): void => {
    clearTimeout(timer);
    timer = setTimeout(runNow, Math.min(MAX_TIMER_MS, Math.max(0, at - now())));
    if (opts.keepAlive === false) timer.unref();
  };

  const succeeded = (due: StepResult): void => {
    if (health.failures > 0) opts.log.warn({ failedSteps: health.failures }, `${opts.name} works again`);
    health.failures = 0;
    health.failing = undefined;
    failedSinceWarn = 0;
    health.lastOkAt = now();
    if (!started || stopped) return;
    let at = pending ? now() : interval > 0 ? now() + interval : Infinity;
    if (typeof due === 'number') at = Math.min(at, due);
    if (at === Infinity) clearTimeout(timer);
    else arm(at);
  };

  const failed = (err: unknown): void => {
    const e = err as { code?: unknown };
    const text = `${typeof e?.code === 'string' ? e.code + ': ' : ''}${coerceError(err).message}`;
    health.failures += 1;
    health.failing = text.slice(0, 500);
    failedSinceWarn += 1;
    const delay = backoffDelay(health.failures, backoff);
    backoffUntil = now() + delay;
    if (now() - lastWarnAt >= WARN_EVERY_MS) {
      lastWarnAt = now();
      opts.log.error(
        { err: health.failing, failedSteps: failedSinceWarn, retryInMs: delay },
        `${opts.name} failed; backing off and retrying`,
      );
      failedSinceWarn = 0;
    }
    pending = false;
    if (started && !stopped) arm(backoffUntil);
  };

  const finish = (err: unknown, due: StepResult, threw: boolean): void => {
    running = false;
    if (threw) failed(err);
    else succeeded(due);
  };

  function runNow(): void {
    if (running) {
      pending = true;
      return;
    }
    if (stopped) return;
    running = true;
    pending = false;
    let out: StepResult | Promise<StepResult>;
    try {
      out = opts.step(abort.signal);
    } catch (err) {
      return finish(err, undefined, true);
    }
    if (out instanceof Promise) {
      inflight = out.then(
        (due) => finish(undefined, due, false),
        (err: unknown) => finish(err, undefined, true),
      );
    } else finish(undefined, out, false);
  }

  return {
    start() {
      if (started || stopped) return;
      started = true;
      arm(now());
    },
    wake() {
      if (!started || stopped) return;
      if (running) {
        pending = true;
        return;
      }
      if (health.failures > 0 && now() < backoffUntil) return;
      arm(now());
    },
    runNow,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      abort.abort();
      await inflight;
    },
    health: () => ({ ...health }),
  };
}
