import { AtpAgent, type AtpSessionEvent } from '@atproto/api';
import type { Logger } from '../../core/log.js';
import { isAuthError } from './errors.js';

/** What logging in to a PDS needs. The password is an app password; it is kept in memory only. */
export interface SessionOptions {
  /** The PDS (or entryway) URL, e.g. `https://bsky.social`. */
  service: string;
  /** Handle or DID of the bot account. */
  identifier: string;
  password: string;
  log: Logger;
  /** A request without an answer after this many ms is aborted (a transient failure). Default 30000. */
  timeoutMs?: number;
}

/**
 * An app-password session that keeps itself alive. The agent refreshes an expired access token with the
 * refresh token on its own; when the refresh token is gone too (expired, revoked, the PDS restarted), the
 * next call logs in again with the app password and is retried once. Nothing is persisted: tokens live in
 * this object and die with the process.
 */
export class BlueskySession {
  readonly agent: AtpAgent;
  private loggingIn: Promise<void> | undefined;
  private expired = true;
  /** How many times this session logged in (the first login included). */
  logins = 0;

  constructor(private readonly opts: SessionOptions) {
    const timeoutMs = opts.timeoutMs ?? 30_000;
    this.agent = new AtpAgent({
      service: opts.service,
      persistSession: (evt: AtpSessionEvent) => this.onSessionEvent(evt),
      // A dead connection must not stall delivery or the poll loop: every request gets a deadline.
      fetch: (input, init) => {
        const deadline = AbortSignal.timeout(timeoutMs);
        const signal = init?.signal ? AbortSignal.any([init.signal, deadline]) : deadline;
        return globalThis.fetch(input, { ...init, signal });
      },
    });
  }

  /** The bot's DID; only valid after `login`. */
  get did(): string {
    const did = this.agent.session?.did;
    if (!did) throw new Error('bluesky: not logged in');
    return did;
  }

  /** The bot's handle, as the PDS reported it at login. */
  get handle(): string {
    return this.agent.session?.handle ?? '';
  }

  /** Logs in (once, even when several callers ask at the same moment). */
  login(): Promise<void> {
    this.loggingIn ??= (async () => {
      try {
        await this.agent.login({ identifier: this.opts.identifier, password: this.opts.password });
        this.expired = false;
        this.logins += 1;
        this.opts.log.info({ did: this.agent.session?.did, logins: this.logins }, 'bluesky: logged in');
      } finally {
        this.loggingIn = undefined;
      }
    })();
    return this.loggingIn;
  }

  /**
   * Runs `fn` with a live session. On an authentication failure the session is renewed by a fresh login
   * and `fn` runs once more; a second failure is the caller's.
   */
  async call<T>(fn: (agent: AtpAgent) => Promise<T>): Promise<T> {
    if (this.expired || !this.agent.hasSession) await this.login();
    try {
      return await fn(this.agent);
    } catch (err) {
      if (!isAuthError(err)) throw err;
      this.opts.log.warn({ err: (err as Error).message }, 'bluesky: session rejected, logging in again');
      await this.login();
      return fn(this.agent);
    }
  }

  private onSessionEvent(evt: AtpSessionEvent): void {
    // 'expired' means the refresh token was refused: only a new login brings the session back.
    if (evt === 'expired' || evt === 'create-failed') this.expired = true;
    if (evt === 'update') this.opts.log.debug('bluesky: session refreshed');
  }
}
