/**
 * A run's hard timeout (GATED_RUN_TIMEOUT_MS): one timer that stands still while a human is asked (§18:
 * waiting counts toward neither timeout) and resumes with the time that was left. It also tells how long
 * ago it should have fired, for /healthz: a run that stays past it is wedged.
 */
export class HardTimeout {
  private timer: NodeJS.Timeout | undefined;
  /** Epoch ms it fires at while running; while held, the ms that were left. */
  private deadline = 0;
  /** Holds in force (they nest): while any, the timer stands still. */
  private holds = 0;
  private stopped = false;

  constructor(
    private readonly now: () => number,
    private readonly fire: () => void,
  ) {}

  /** Starts (or restarts) it with `ms` to go. */
  arm(ms: number): void {
    clearTimeout(this.timer);
    this.deadline = this.now() + ms;
    this.timer = setTimeout(this.fire, ms);
  }

  /** Stops the clock; calls nest. */
  hold(): void {
    if (this.stopped || this.holds++ > 0) return;
    clearTimeout(this.timer);
    this.deadline -= this.now();
  }

  /** Ends one hold(); the last one re-arms it with the time it had left. */
  release(): void {
    if (this.holds === 0 || --this.holds > 0 || this.stopped) return;
    this.arm(Math.max(0, this.deadline));
  }

  /** Whether a hold() is open (a human is asked). */
  get held(): boolean {
    return this.holds > 0;
  }

  /** How long ago it should have fired: 0 while it has time left, is held, or was stopped. */
  overdueMs(now: number): number {
    if (this.stopped || this.holds > 0) return 0;
    return Math.max(0, now - this.deadline);
  }

  /** Stops it for good (the run ended). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Clears the timer without ending it (the run is being killed and ends shortly). */
  clear(): void {
    clearTimeout(this.timer);
  }
}
