import { backoffDelay, type BackoffOptions } from './backoff.js';
import { coerceError } from './errors.js';
import type { Logger } from './log.js';
import { detached } from './trace.js';

/**
 * The one driver of a background worker (the poll loop, delivery's scan, the drafts' pacer, the inbox, the
 * tool approvals' checker, tasks, daemons, Bluesky's notification poll). A worker is a `step` run again and
 * again, never two at once: at once after `wake()` (many wakes while a step runs coalesce into one more
 * step), at the latest after `intervalMs` (the timer fallback that finds work no wake announced, such as
 * rows another process wrote), or at the time the last step asked for. A step that throws is retried after
 * the one backoff of core/backoff.ts, or after the wait `failureDelay` reads from the failure (a rate
 * limit's reset), and wakes wait for it: a failing disk must not become a busy loop. `stop()` resolves
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
  /**
   * The wait in ms before the next step after a failed one, chosen by the worker from what failed (a rate
   * limit's reset time, a Retry-After) and how many steps failed in a row; undefined keeps the backoff.
   */
  failureDelay?: (err: unknown, failures: number) => number | undefined;
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
  /**
   * Starts the worker with its first step run now, and resolves when that step has ended (its outcome
   * then times the next, as any step's does). For a start that must have done one round before it
   * returns, such as a channel storing what arrived while gated was down. Never rejects.
   */
  startNow(): Promise<void>;
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
  return new Driver(opts);
}

/** The text a failed step leaves in health and the log: its code, when it has one, and its message. */
function failureText(err: unknown): string {
  const e = err as { code?: unknown };
  return `${typeof e?.code === 'string' ? e.code + ': ' : ''}${coerceError(err).message}`.slice(0, 500);
}

/** The driver behind createWorker: when steps run (scheduling) and what their outcomes do (pacing). */
class Driver implements Worker {
  private readonly now: () => number;
  private readonly interval: number;
  private readonly backoff: BackoffOptions;
  private started = false;
  private stopped = false;
  private running = false;
  private pending = false;
  private timer: NodeJS.Timeout | undefined;
  private inflight: Promise<void> = Promise.resolve();
  private readonly abort = new AbortController();
  private readonly state: WorkerHealth;
  private backoffUntil = 0;
  private lastWarnAt = -Infinity;
  private failedSinceWarn = 0;

  constructor(private readonly opts: WorkerOptions) {
    this.now = opts.now ?? Date.now;
    this.interval = opts.intervalMs ?? 0;
    this.backoff = { baseMs: this.interval || 1000, maxMs: 30_000, random: () => 1, ...opts.backoff };
    this.state = { lastOkAt: this.now(), failing: undefined, failures: 0 };
  }

  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    this.arm(this.now());
  }

  startNow(): Promise<void> {
    if (this.started || this.stopped) return this.inflight;
    this.started = true;
    this.runNow();
    return this.inflight;
  }

  wake(): void {
    if (!this.started || this.stopped) return;
    if (this.running) {
      this.pending = true;
      return;
    }
    if (this.state.failures > 0 && this.now() < this.backoffUntil) return;
    this.arm(this.now());
  }

  readonly runNow = (): void => {
    if (this.running) {
      this.pending = true;
      return;
    }
    if (this.stopped) return;
    this.running = true;
    this.pending = false;
    let out: StepResult | Promise<StepResult>;
    try {
      // A worker's step is its own work: never in the trace of whatever woke it (core/trace.ts).
      out = detached(() => this.opts.step(this.abort.signal));
    } catch (err) {
      return this.failed(err);
    }
    if (out instanceof Promise) {
      this.inflight = out.then(
        (due) => this.succeeded(due),
        (err: unknown) => this.failed(err),
      );
    } else this.succeeded(out);
  };

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.abort.abort();
    await this.inflight;
  }

  health(): WorkerHealth {
    return { ...this.state };
  }

  private arm(at: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(this.runNow, Math.min(MAX_TIMER_MS, Math.max(0, at - this.now())));
    if (this.opts.keepAlive === false) this.timer.unref();
  }

  /** A step ended well: health is clean again, and the next step runs at once, when due, or on the interval. */
  private succeeded(due: StepResult): void {
    this.running = false;
    const { state } = this;
    if (state.failures > 0)
      this.opts.log.warn({ failedSteps: state.failures }, `${this.opts.name} works again`);
    state.failures = 0;
    state.failing = undefined;
    this.failedSinceWarn = 0;
    state.lastOkAt = this.now();
    if (!this.started || this.stopped) return;
    let at = this.pending ? this.now() : this.interval > 0 ? this.now() + this.interval : Infinity;
    if (typeof due === 'number') at = Math.min(at, due);
    if (at === Infinity) clearTimeout(this.timer);
    else this.arm(at);
  }

  /** A step threw: count it, wait the step's own delay or the backoff (wakes wait too), warn now and then. */
  private failed(err: unknown): void {
    this.running = false;
    const { state } = this;
    state.failures += 1;
    state.failing = failureText(err);
    this.failedSinceWarn += 1;
    const delay = this.opts.failureDelay?.(err, state.failures) ?? backoffDelay(state.failures, this.backoff);
    this.backoffUntil = this.now() + delay;
    if (this.now() - this.lastWarnAt >= WARN_EVERY_MS) {
      this.lastWarnAt = this.now();
      this.opts.log.error(
        { err: state.failing, failedSteps: this.failedSinceWarn, retryInMs: delay },
        `${this.opts.name} failed; backing off and retrying`,
      );
      this.failedSinceWarn = 0;
    }
    this.pending = false;
    if (this.started && !this.stopped) this.arm(this.backoffUntil);
  }
}

/** A worker that drains a table's due rows (the inbox's downloads, the transcriptions) and says when it is idle. */
export interface DrainWorker {
  start(): void;
  /** Drains at once (a row was stored or became due). */
  wake(): void;
  /** Resolves when no pass is in flight. */
  idle(): Promise<void>;
  stop(): Promise<void>;
}

/** How a drain worker runs. */
export interface DrainWorkerOptions {
  name: string;
  log: Logger;
  /** One pass over what is due; `stopped()` turns true once stop() was called. Resolves with the next due time. */
  drain: (stopped: () => boolean) => Promise<number | undefined>;
  /** Subscribes `wake` to the signals that mean work; returns the unsubscribe. */
  listen?: (wake: () => void) => (() => void) | undefined;
  /** Done before the first pass (e.g. clearing a spool a killed process left). */
  beforeStart?: () => Promise<unknown>;
  /** The timer fallback in ms, for rows another process made due (default 1000). */
  pollMs?: number;
  now?: () => number;
}

/** Makes a drain worker on createWorker: passes on wakes, due times and the poll interval, never keeping the process alive. */
export function createDrainWorker(opts: DrainWorkerOptions): DrainWorker {
  let stopped = false;
  let idle: Promise<void> = Promise.resolve();
  const worker = createWorker({
    name: opts.name,
    log: opts.log,
    step: () => {
      const pass = opts.drain(() => stopped);
      idle = pass.then(
        () => undefined,
        () => undefined,
      );
      return pass;
    },
    intervalMs: opts.pollMs ?? 1000,
    keepAlive: false,
    ...(opts.now ? { now: opts.now } : {}),
  });
  const unlisten = opts.listen?.(() => worker.wake());
  return {
    start: () => {
      if (opts.beforeStart) void opts.beforeStart().finally(() => worker.start());
      else worker.start();
    },
    wake: () => worker.wake(),
    async idle() {
      await idle;
    },
    async stop() {
      stopped = true;
      unlisten?.();
      await worker.stop();
    },
  };
}
