import type { Logger } from '../core/log.js';

/** How long an agent has to answer an interrupt before its turn is treated as queued (docs/PROTOCOL.md). */
export const INTERRUPT_GRACE_MS = 10_000;

/**
 * The interrupts of one run (docs/PROTOCOL.md): at most one written and not answered yet; one that the agent
 * leaves unanswered past the grace makes its turn wait as in `queue` mode, and no further interrupt is
 * written until the agent has answered that turn (then interrupts resume).
 */
export class Interrupts {
  /** The interrupt line written and not answered yet: its turn, when, and the grace timer. */
  private pending: { turn: number; atMs: number; timer: NodeJS.Timeout } | null = null;
  /** The newest turn whose interrupt went unanswered past the grace (waited for as queued). */
  private waitedFor = 0;

  constructor(
    private readonly log: Logger,
    private readonly fields: Record<string, unknown>,
    private readonly graceMs: number,
    private readonly now: () => number,
    /** An interrupt line was written (the ask broker cancels the turn's asks). */
    private readonly onWritten: () => void = () => {},
  ) {}

  /** An interrupt may be written now, with turns 1..answered answered. */
  allowed(answered: number): boolean {
    return this.pending === null && answered >= this.waitedFor;
  }

  /** The interrupt line for `turn` was written. */
  written(turn: number): void {
    const timer = setTimeout(() => {
      // Past the grace: nothing is killed, the follow-up already written waits its turn, and this turn is
      // not interrupted again.
      this.pending = null;
      this.waitedFor = turn;
      this.log.warn(
        { ...this.fields, turn, graceMs: this.graceMs },
        'the agent did not answer an interrupt in time: its turn is waited for as queued',
      );
    }, this.graceMs);
    timer.unref?.();
    this.pending = { turn, atMs: this.now(), timer };
    this.log.info({ ...this.fields, turn }, 'interrupting the turn in progress');
    this.onWritten();
  }

  /** Turns 1..through are answered: the interrupt (if any) is once its turn is; logs how long it took. */
  answered(through: number, interrupted: boolean): void {
    const i = this.pending;
    if (i === null || through < i.turn) return;
    clearTimeout(i.timer);
    this.pending = null;
    this.log.info(
      { ...this.fields, turn: i.turn, ms: this.now() - i.atMs, interrupted },
      'interrupt answered',
    );
  }

  /** The run ended: no timer stays behind. */
  clear(): void {
    if (this.pending) clearTimeout(this.pending.timer);
    this.pending = null;
  }
}
