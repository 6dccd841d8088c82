/**
 * Wrong codes per sender (docs/ACCESS.md, "Codes"): a code typed with /approve or /reject that names nothing
 * the sender may decide (unknown, malformed, or another group's) is a guess. After GUESSES_PER_WINDOW guesses
 * in a window of GUESS_WINDOW_MS a sender's /approve and /reject are refused, with the time they work again,
 * until the window ends; nothing is looked up meanwhile. Kept in memory: a restart forgets the count, which
 * costs a guesser one more window, not a code (codes hold 5 and 8 characters of 31 symbols).
 */

/** Wrong codes a sender may type per window. */
export const GUESSES_PER_WINDOW = 5;
/** The window, in ms (fixed windows from a sender's first guess). */
export const GUESS_WINDOW_MS = 15 * 60_000;

interface Window {
  start: number;
  guesses: number;
}

/** The count of wrong codes of each sender in their current window. */
export class CodeGuesses {
  /** Windows in the order they started (a restarted window moves to the end): the oldest end first. */
  private readonly windows = new Map<string, Window>();

  /** The refusal for a sender out of guesses, or undefined while they may type codes. */
  refusal(sender: string, now: number): string | undefined {
    this.prune(now);
    const w = this.windows.get(sender);
    if (!w || w.guesses < GUESSES_PER_WINDOW) return undefined;
    const until = new Date(w.start + GUESS_WINDOW_MS).toISOString().slice(11, 16);
    return `too many wrong codes: /approve and /reject are refused for you until ${until} UTC`;
  }

  /** Counts one wrong code of `sender`. */
  miss(sender: string, now: number): void {
    this.prune(now);
    const w = this.windows.get(sender);
    if (w) w.guesses += 1;
    else this.windows.set(sender, { start: now, guesses: 1 });
  }

  /** Drops the windows that ended: the map holds only senders who guessed within the last window. */
  private prune(now: number): void {
    for (const [sender, w] of this.windows) {
      if (now - w.start < GUESS_WINDOW_MS) break;
      this.windows.delete(sender);
    }
  }
}
