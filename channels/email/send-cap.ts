/**
 * A bound on what gated sends by mail to one correspondent (docs/CHANNELS.md, "Email"): an auto-responder
 * that does not mark its mail (no `Auto-Submitted`, no precedence header) answers every reply, gated
 * answers every mail, and the two loop. Past `perHour` mails to one address within an hour, gated sends
 * that address one note saying so, then nothing more until the hour's count falls below the cap. Counts
 * live in memory: a restart starts them over, which a loop survives by at most one more hour's cap.
 */

/** What the next mail to an address may be: sent, replaced by the one note, or refused. */
export type CapVerdict = 'send' | 'note' | 'refuse';

/** The default cap: far above a person's conversation, far below a loop's hour. */
export const DEFAULT_MAILS_PER_HOUR = 30;

const HOUR_MS = 3_600_000;

/** The hourly count of mails per correspondent. */
export class CorrespondentCap {
  private readonly sent = new Map<string, { at: number[]; noted: boolean }>();

  constructor(
    readonly perHour: number = DEFAULT_MAILS_PER_HOUR,
    private readonly now: () => number = Date.now,
  ) {}

  /** Decides the next mail to `address` and counts it when it goes out (the note counts too). */
  take(address: string): CapVerdict {
    const t = this.now();
    const entry = this.sent.get(address) ?? { at: [], noted: false };
    entry.at = entry.at.filter((s) => t - s < HOUR_MS);
    if (entry.at.length < this.perHour) entry.noted = false;
    this.sent.set(address, entry);
    if (entry.at.length < this.perHour) {
      entry.at.push(t);
      return 'send';
    }
    if (entry.noted) return 'refuse';
    entry.noted = true;
    return 'note';
  }

  /** A mail `take` counted did not go out (the server refused it): it does not count. */
  giveBack(address: string, verdict: CapVerdict): void {
    const entry = this.sent.get(address);
    if (!entry) return;
    if (verdict === 'note') entry.noted = false;
    else if (verdict === 'send') entry.at.pop();
  }

  /** The note's text: why gated stops writing to this address, and until when. */
  note(): string {
    return (
      `gated has sent ${this.perHour} mails to this address within an hour and writes no more to it ` +
      'for now: this looks like a loop with an automatic responder. Mail sent meanwhile is kept and read.'
    );
  }
}
