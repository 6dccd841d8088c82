import { setTimeout as realTimeout } from 'node:timers';
import { LOCK_RETRY_MS } from '../store/group-commit.js';

/**
 * A run's inbox (docs/QUEUE.md "Lock waits"): the agent's events (its blocks, its end) are handled at once
 * when gated's connection can write without waiting for another process's write lock, else kept, in the
 * order they came, and handled once the lock is had, so that the event loop never sleeps in SQLite's busy
 * handler for them. The retry runs on node:timers' own clock: a test's fake clock must not hold it back.
 */
export class Inbox {
  private readonly kept: Array<() => void> = [];
  private timer: NodeJS.Timeout | undefined;

  /**
   * `writable`: true when a write can start now (it opens the turn's group commit); `within`: runs the
   * kept events in the run's trace.
   */
  constructor(
    private readonly writable: () => boolean,
    private readonly within: (fn: () => void) => void,
  ) {}

  /** Handles `event` now if nothing waits before it and the lock is had; else keeps it for later. */
  handle(event: () => void): void {
    if (this.kept.length === 0 && this.writable()) return event();
    this.kept.push(event);
    this.timer ??= realTimeout(this.drain, LOCK_RETRY_MS);
  }

  private readonly drain = (): void => {
    this.timer = undefined;
    this.within(() => {
      while (this.kept.length > 0) {
        if (!this.writable()) {
          this.timer = realTimeout(this.drain, LOCK_RETRY_MS);
          return;
        }
        this.kept.shift()!();
      }
    });
  };
}
