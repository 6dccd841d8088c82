/**
 * A run's inbox (docs/QUEUE.md "Lock waits"): the agent's events (its blocks, its end) are handled at once
 * when gated's connection can write without waiting for another process's write lock, else kept, in the
 * order they came, and handled once the lock is had (store/group-commit.ts `writableNow`), so that the
 * event loop never sleeps in SQLite's busy handler for them.
 */
export class Inbox {
  private readonly kept: Array<() => void> = [];

  /**
   * `writable`: true when a write can start now (it opens the turn's group commit), else a promise of when
   * it can; `within`: runs the kept events in the run's trace; `flow`: false while events are kept, true
   * once they are all handled, so that the run stops reading the agent's output meanwhile (its pipe fills
   * and the agent waits, as when gated itself was waiting): an agent cannot grow gated's memory by
   * printing while the lock is held elsewhere.
   */
  constructor(
    private readonly writable: () => true | Promise<void>,
    private readonly within: (fn: () => void) => void,
    private readonly flow: (on: boolean) => void = () => undefined,
  ) {}

  /**
   * Handles `event` now if nothing waits before it and the lock is had; else keeps it for later. An event
   * that `writes` nothing (a draft block) needs no lock: handled at once unless events wait before it, so
   * that it opens no write transaction (the turn's group commit) of its own.
   */
  handle(event: () => void, writes = true): void {
    if (this.kept.length === 0) {
      if (!writes) return event();
      const now = this.writable();
      if (now === true) return event();
      this.flow(false);
      this.waitFor(now);
    }
    this.kept.push(event);
  }

  private waitFor(lock: Promise<void>): void {
    void lock.then(() => this.within(() => this.drain()));
  }

  /** The kept events in order, each once the lock is had (another process may take it between two). */
  private drain(): void {
    while (this.kept.length > 0) {
      const now = this.writable();
      if (now !== true) return this.waitFor(now);
      this.kept.shift()!();
    }
    this.flow(true);
  }
}
