import { retryInBackground, type BackoffOptions, type Sleep } from '../core/backoff.js';
import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';

/** How a channel reaches its platform at start, and what it says while it cannot. */
export interface ConnectionOptions {
  /** The platform, as the log lines name it. */
  platform: string;
  log: Logger;
  /** True when retrying cannot help (a refused token or credentials): the start fails, the retries stop. */
  refused: (err: unknown) => boolean;
  /** What a refusal refused, for the log line ("the bot token", "the credentials"). */
  refusedWhat: string;
  /** The waits between retries (tests). */
  sleep?: Sleep;
  /** Default: 1 s doubling to 60 s (retryInBackground's). */
  backoff?: BackoffOptions;
}

/**
 * A channel's connection to its platform, which Telegram, Discord, Slack and GitHub each open the same way:
 * `open` tries once; a refusal fails the start, any other failure (a platform that cannot be reached yet)
 * is logged and tried again in the background with the one backoff (`retryInBackground`) until it
 * connects, is refused or is stopped, so a gateway booted before the network still comes up. `then`, when
 * given, runs once connected (Telegram's poll loop) and is what `close` waits for too. `signal` aborts at
 * `close`, which waits for whatever is still trying.
 */
export class Connection {
  private abort = new AbortController();
  private pending: Promise<void> | undefined;

  constructor(private readonly opts: ConnectionOptions) {}

  /** Aborted by `close`: a connect that finishes after it must undo itself. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  /** True between an `open` and its `close`, while retrying or running `then`. */
  get busy(): boolean {
    return this.pending !== undefined;
  }

  async open(attempt: () => Promise<void>, then?: () => Promise<void>): Promise<void> {
    this.abort = new AbortController();
    const { platform, log } = this.opts;
    try {
      await attempt();
    } catch (err) {
      if (this.opts.refused(err)) throw err;
      log.warn({ err: coerceError(err).message }, `${platform} unreachable; retrying in the background`);
      this.pending = this.retry(attempt, then);
      return;
    }
    if (then) this.pending = then();
  }

  private async retry(attempt: () => Promise<void>, then?: () => Promise<void>): Promise<void> {
    const { platform, log } = this.opts;
    let connected = false;
    await retryInBackground(
      async () => {
        await attempt();
        connected = true;
      },
      {
        signal: this.abort.signal,
        sleep: this.opts.sleep,
        backoff: this.opts.backoff,
        failed: (err, n) => {
          const refused = this.opts.refused(err);
          log[refused ? 'error' : 'warn'](
            { err: coerceError(err).message, attempt: n },
            refused
              ? `${platform} refused ${this.opts.refusedWhat}; channel stopped`
              : `${platform} still unreachable`,
          );
          return refused ? 'give up' : 'retry';
        },
      },
    );
    if (connected && then && !this.abort.signal.aborted) await then();
  }

  /** Stops any retrying and waits for it (and for `then`, which sees `signal` aborted). */
  async close(): Promise<void> {
    this.abort.abort();
    await this.pending;
    this.pending = undefined;
  }
}
