/** Retry timing for delivery: capped exponential backoff with jitter, and a sleep that stop() can cut short. */

/** How transient failures are spaced. */
export interface BackoffOptions {
  /** Delay before the first retry, before jitter. Default 1000. */
  baseMs?: number;
  /** Longest delay between two attempts. Default 60000. */
  maxMs?: number;
  /** Source of jitter in [0, 1). Default Math.random. */
  random?: () => number;
}

/**
 * Delay before retry number `attempt` (1 for the first retry): base·2^(attempt−1), capped, then scaled by a
 * random factor in [0.5, 1) so that many chats failing together do not retry in lockstep.
 */
export function backoffDelay(attempt: number, opts: BackoffOptions = {}): number {
  const base = opts.baseMs ?? 1000;
  const max = opts.maxMs ?? 60_000;
  const exp = Math.min(max, base * 2 ** Math.min(Math.max(attempt - 1, 0), 30));
  return Math.round(exp * (0.5 + (opts.random ?? Math.random)() * 0.5));
}

/** Waits `ms`, or less when `signal` aborts; never rejects (the caller checks whether it is stopping). */
export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>;

/** The real timer-based Sleep. */
export const abortableSleep: Sleep = (ms, signal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
