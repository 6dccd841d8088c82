import { DeliveryError } from '../core/errors.js';
import { platformRow } from '../core/platforms.js';

/**
 * What the drafts may send of one platform a second, over all its chats (PlatformRow.draftsPerSecond): a
 * bucket of that many calls, refilled at that rate. A flood limit answered (429 with a retry-after) stops
 * every draft of the platform until it passes, since a platform's answer does not say whether the chat's
 * limit or the bot's was hit. The chats waiting take their turns oldest edit first (delivery/drafts.ts), so
 * under the budget every chat's draft still moves, each less often; answers are not drafts and never wait
 * on it (they keep the rest of the platform's limit, and wait on its 429s in delivery).
 */
export class DraftBudget {
  private tokens: number;
  private at: number;
  private pausedUntil = 0;

  constructor(
    private readonly perSecond: number,
    now: number,
  ) {
    this.tokens = perSecond;
    this.at = now;
  }

  /** 0 when a call may go now (and it is counted), else the time when the next may. */
  take(now: number): number {
    if (now < this.pausedUntil) return this.pausedUntil;
    this.tokens = Math.min(this.perSecond, this.tokens + ((now - this.at) / 1000) * this.perSecond);
    this.at = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 0;
    }
    return now + Math.ceil(((1 - this.tokens) / this.perSecond) * 1000);
  }

  /** The platform answered a flood limit: no draft call before `until`. */
  pause(until: number): void {
    this.pausedUntil = Math.max(this.pausedUntil, until);
  }
}

/** The budgets of the platforms that have one, by platform name. */
export function draftBudgets(platforms: readonly string[], now: number): Map<string, DraftBudget> {
  const budgets = new Map<string, DraftBudget>();
  for (const p of platforms) {
    const perSecond = platformRow(p)?.draftsPerSecond ?? null;
    if (perSecond !== null) budgets.set(p, new DraftBudget(perSecond, now));
  }
  return budgets;
}

/** The wait a flood limit `err` asks for (a 429: its retry-after, else 1 s); undefined for other errors. */
export function floodWaitOf(err: unknown): number | undefined {
  if (!(err instanceof DeliveryError) || err.failure !== 'rate_limited') return undefined;
  return err.retryAfterMs ?? 1000;
}
