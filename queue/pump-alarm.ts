/**
 * The promises with time the scheduler keeps (docs/QUEUE.md, "The scheduler's clock"), each a deadline by
 * which the pump runs again at the latest:
 * - `backoff`: a lane whose run failed starts again when its backoff ends;
 * - `lock`: a dispatch that met another process's write lock is tried again soon;
 * - `failure`: ready rows never wait for a wake that may not come after a pump that threw;
 * - `hold`: new runs wait for the poll loop to catch up only so long at a time;
 * - `grace`: an idle agent kept in its grace yields its slot when the grace ends.
 */
export type PumpDeadline = 'backoff' | 'lock' | 'failure' | 'hold' | 'grace';

/**
 * One timer for every deadline of the scheduler, armed at the earliest. When it rings, the deadlines it was
 * armed for are dropped and `ring` runs (the scheduler's wake, a coalesced pump); a deadline still wanted
 * is set again by that pump. Unref'd: a deadline never keeps the process alive by itself.
 */
export class PumpAlarm {
  private readonly due = new Map<PumpDeadline, number>();
  private timer: NodeJS.Timeout | undefined;
  private armedFor: number | undefined;

  constructor(
    private readonly now: () => number,
    private readonly ring: () => void,
  ) {}

  /** `deadline` is at `at` from now on (null: no longer wanted), whatever it was before. */
  set(deadline: PumpDeadline, at: number | null): void {
    if (at === null) this.due.delete(deadline);
    else this.due.set(deadline, at);
    this.arm();
  }

  /** `deadline` is at `at`, unless it is set already to an earlier time. */
  soonest(deadline: PumpDeadline, at: number): void {
    const before = this.due.get(deadline);
    if (before === undefined || at < before) this.set(deadline, at);
  }

  /** Drops every deadline; the alarm rings no more. */
  clear(): void {
    this.due.clear();
    this.arm();
  }

  private arm(): void {
    let next: number | undefined;
    for (const at of this.due.values()) if (next === undefined || at < next) next = at;
    if (next === this.armedFor) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = next;
    if (next === undefined) return;
    this.timer = setTimeout(() => this.rang(next), Math.max(0, next - this.now()));
    this.timer.unref?.();
  }

  private rang(armedFor: number): void {
    this.timer = undefined;
    this.armedFor = undefined;
    // Dropped by the time the timer was armed for, not by the clock: an injected clock need not move.
    for (const [deadline, at] of this.due) if (at <= armedFor) this.due.delete(deadline);
    this.arm();
    this.ring();
  }
}
