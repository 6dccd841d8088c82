import { ActionStore, delegationOf, type DelegationRow } from '../../store/actions.js';
import type { Db } from '../../store/db.js';
import { DailyUsage } from '../../store/limits.js';

/**
 * Delegation chains (docs/SECURITY.md): a delegation, the delegations its runs make and every answer that comes
 * back are one conversation, started by one message (its origin). Its depth (how far it nests) and its hops
 * (rows placed in sessions for it: delegations and answers) are bounded per originating message, and every
 * run it causes counts against the daily limits of the group that runs it. A parent and child answering
 * each other therefore stop at the hop bound instead of running forever.
 */

/** How far a chain may go: GATED_MAX_DELEGATION_DEPTH and GATED_MAX_DELEGATION_HOPS. */
export interface ChainBounds {
  maxDepth: number;
  maxHops: number;
}

/** docs/SECURITY.md's defaults: 3 deep, 20 hops per originating message. */
export const DEFAULT_CHAIN_BOUNDS: ChainBounds = { maxDepth: 3, maxHops: 20 };

/** Where a delegation made now would stand: the chain's origin and its depth. */
export interface ChainPlace {
  origin: number;
  depth: number;
}

/** What a block's turn is, as the chain sees it: the chat of its run, the newest row it answers, all its rows. */
export interface ChainContext {
  chatJid: string;
  answering: { id: number } | null;
  turnRows?: readonly number[];
}

/** The origin of a delegation's chain (a delegation older than chains started its own). */
function originOf(d: DelegationRow): number {
  return d.origin ?? d.message_id ?? 0;
}

/** The bounds of delegation chains, read from rows at the moment an action or answer is applied. */
export class DelegationChains {
  private readonly store: ActionStore;
  private readonly usage: DailyUsage;

  constructor(
    db: Db,
    private readonly bounds: ChainBounds,
  ) {
    this.store = new ActionStore(db);
    this.usage = new DailyUsage(db);
  }

  /**
   * Where a delegation made by this turn would stand. A run of a delegation nests one deeper than it; a
   * turn with an answer that came back stays at the depth of the delegation it answered (depth never
   * resets on an answer), whatever else the turn holds (a chain is not restarted by a message batched with
   * its answer: of several chains, the one with the most hops goes on); any other turn starts a chain of
   * its newest message.
   */
  place(ctx: ChainContext): ChainPlace | { refused: string } {
    const runOf = delegationOf(ctx.chatJid);
    const own = runOf === null ? undefined : this.store.delegation(runOf);
    if (own) return { origin: originOf(own), depth: own.depth + 1 };
    if (!ctx.answering) return { refused: 'there is no message this turn answers' };
    let best: (ChainPlace & { hops: number }) | undefined;
    for (const id of ctx.turnRows ?? [ctx.answering.id]) {
      const row = this.store.chainRow(id);
      if (!row) continue;
      const d = row.delegation;
      const place = { origin: originOf(d), depth: row.answer ? d.depth : d.depth + 1 };
      const hops = this.store.hops(place.origin);
      if (!best || hops > best.hops || (hops === best.hops && place.depth > best.depth))
        best = { ...place, hops };
    }
    return best ? { origin: best.origin, depth: best.depth } : { origin: ctx.answering.id, depth: 1 };
  }

  /** Why a delegation at `place` to group `to` may not be made now, or null when it may. */
  refusal(place: ChainPlace, to: string, now: number): string | null {
    const { maxDepth } = this.bounds;
    if (place.depth > maxDepth)
      return `the delegation chain would be ${place.depth} deep; at most ${maxDepth}`;
    return this.hopRefusal(place.origin) ?? this.limitRefusal(to, now);
  }

  /**
   * Why an answer of delegation `d` may not go back to its session now, or null. Such an answer is kept as a
   * `limited` row with this reason (nothing is lost; an operator may release it).
   */
  answerWithheld(d: DelegationRow, now: number): string | null {
    return this.hopRefusal(originOf(d)) ?? this.limitRefusal(d.from_group, now);
  }

  private hopRefusal(origin: number): string | null {
    const hops = this.store.hops(origin) + 1;
    const { maxHops } = this.bounds;
    return hops > maxHops
      ? `the delegation chain of message ${origin} would make ${hops} hops; at most ${maxHops}`
      : null;
  }

  private limitRefusal(group: string, now: number): string | null {
    const hit = this.usage.reached(group, this.usage.limitsOf(group), now);
    return hit ? `'${group}' reached its limit of ${hit.text}` : null;
  }
}
