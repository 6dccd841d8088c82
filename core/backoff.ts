/**
 * Retry timing: capped exponential backoff with jitter, a sleep that stop() can cut short, and the reconnect
 * of a channel that could not reach its platform at start.
 */

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

/** What a failed attempt of retryInBackground means: try again after the backoff, or give up. */
export type AttemptVerdict = 'retry' | 'give up';

/**
 * The reconnect of a channel whose first try at start failed (a platform that cannot be reached yet): waits
 * the backoff (1 s doubling to 60 s, jittered, unless `backoff` says otherwise), tries `attempt` again, and
 * so on until it succeeds, `failed` gives up (refused credentials: retrying cannot help), or `signal`
 * aborts. `failed` is also where the attempt's failure is logged.
 */
export async function retryInBackground(
  attempt: () => Promise<void>,
  opts: {
    signal: AbortSignal;
    failed: (err: unknown, attempt: number) => AttemptVerdict;
    sleep?: Sleep;
    backoff?: BackoffOptions;
  },
): Promise<void> {
  const { signal } = opts;
  const sleep = opts.sleep ?? abortableSleep;
  for (let n = 1; !signal.aborted; n += 1) {
    await sleep(backoffDelay(n, opts.backoff ?? { baseMs: 1000, maxMs: 60_000 }), signal);
    if (signal.aborted) return;
    try {
      await attempt();
      return;
    } catch (err) {
      if (opts.failed(err, n) === 'give up') return;
    }
  }
}
