import type { BatchRow } from '../store/queue.js';

/**
 * The turns of one run (docs/PROTOCOL.md). Every stdin line gated writes is a turn, numbered 1, 2, … within
 * the run; a block answers turns, and the rows of a turn become `done` only with a block that answers it.
 *
 * Blocks answer a prefix: `turn: k` answers every turn up to k, a block without `turn` answers the oldest
 * open one. So the answered turns are always 1..answered and two numbers say everything.
 */

/** What one block answers, decided before it is stored. */
export interface Credit {
  /** The turns 1..through are answered once the block commits; 0: it answers no open turn. */
  through: number;
  /** The row a reply to this block answers: the newest row of the turn it speaks to. */
  replyTo: BatchRow;
  /** Every row of the turns the block answers (of the turn it speaks to when it answers none). */
  rows: readonly BatchRow[];
}

/** The written and answered turns of a run. */
export class Turns {
  /** rows[n - 1] are the rows of turn n. Never empty once the run has its input (turn 1). */
  private readonly rows: (readonly BatchRow[])[] = [];
  /** Turns 1..answered are answered; always 0 ≤ answered ≤ written. Only grows. */
  private answeredThrough = 0;
  /**
   * True once the agent printed a block with an integer `turn` (partial or not). Until then it may be an
   * agent that predates turns, whose blocks are credited to the oldest open turn: it gets its next line
   * only once every written turn is answered, so a block is never credited to a line it had not read.
   */
  numbered = false;
  /** How long the agent waited with every turn answered: the run's idle time (the rest is work). */
  readonly idle = new IdleClock();

  /** Turns written so far; the next line is turn written + 1. */
  get written(): number {
    return this.rows.length;
  }

  /** The highest answered turn (0 before the first answer). */
  get answered(): number {
    return this.answeredThrough;
  }

  /** Turns written and not answered yet. */
  get open(): number {
    return this.rows.length - this.answeredThrough;
  }

  /** A further line may be written now: nothing is open, or the agent numbers its blocks. */
  get canWrite(): boolean {
    return this.open === 0 || this.numbered;
  }

  /** The oldest open turn (the one in progress), or the newest turn when none is open. */
  get current(): number {
    return Math.min(this.answeredThrough + 1, this.rows.length);
  }

  /** Records a written line; returns its turn number. */
  add(rows: readonly BatchRow[]): number {
    if (rows.length === 0) throw new Error('a turn needs at least one row');
    this.rows.push(rows);
    return this.rows.length;
  }

  /** The message ids of the open turns (what a tool question is asked for), oldest first. */
  openRowIds(): number[] {
    return this.rows.slice(this.answeredThrough).flatMap((turn) => turn.map((r) => r.id));
  }

  /** The rows of the open turns, or of the newest turn when none is open (whom a memory question serves). */
  currentRows(): readonly BatchRow[] {
    const open = this.rows.slice(this.answeredThrough).flat();
    return open.length > 0 ? open : (this.rows[this.rows.length - 1] ?? []);
  }

  /** The newest row of turn n (1-based, clamped to the written turns). */
  lastRowOf(n: number): BatchRow {
    const turn = this.rows[Math.max(1, Math.min(n, this.rows.length)) - 1]!;
    return turn[turn.length - 1]!;
  }

  /** What a non-partial block with this `turn` (or none) answers. Changes nothing. */
  credit(turn: number | undefined): Credit {
    const target = turn === undefined ? this.answeredThrough + 1 : Math.min(turn, this.rows.length);
    if (target > this.answeredThrough && target <= this.rows.length) {
      const rows = this.rows.slice(this.answeredThrough, target).flat();
      return { through: target, replyTo: this.lastRowOf(target), rows };
    }
    // Nothing open to answer (a second block for a turn, or more blocks than lines): still a reply.
    const n = turn ?? this.rows.length;
    return {
      through: 0,
      replyTo: this.lastRowOf(n),
      rows: this.rows[Math.max(1, Math.min(n, this.rows.length)) - 1]!,
    };
  }

  /** The block that answers 1..through has committed. */
  answer(through: number): void {
    if (through > this.rows.length) throw new Error(`turn ${through} was never written`);
    if (through > this.answeredThrough) this.answeredThrough = through;
  }
}

/**
 * How a run's time splits into work and idle: the agent is idle from an answer that left no turn open (its
 * idle timer armed) to the next turn written or the end of the run (the idle timeout, and its exit after
 * it); the rest is work (session_log.idle_ms, docs/WEB.md).
 */
export class IdleClock {
  /** Epoch ms since which the agent has waited for a follow-up; null while it works. */
  private since: number | null = null;
  /** Milliseconds of the idle stretches that ended. */
  private before = 0;

  /** The agent answered every turn and waits (a stretch already running goes on). */
  start(now: number): void {
    this.since ??= now;
  }

  /** A turn was written: the agent works again. */
  stop(now: number): void {
    this.before = this.ms(now);
    this.since = null;
  }

  /** Milliseconds spent idle up to `at`. */
  ms(at: number): number {
    return this.before + (this.since === null ? 0 : Math.max(0, at - this.since));
  }
}

/** The ids of a turn's rows, in order (for the run's trace). */
export function rowIds(rows: readonly BatchRow[]): number[] {
  return rows.map((r) => r.id);
}
