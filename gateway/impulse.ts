import type { Db } from '../store/db.js';

/**
 * The impulse gate (docs/ROUTING.md, "Impulse gate"). Its whole state is the `held` rows of `messages` (weight, threshold,
 * max_hold_ms, held_at recorded when each was routed), so a restart neither drops held messages nor
 * releases them early: release decisions are recomputed from the rows.
 *
 * Per chat: the weights of its held messages add up; the chat is released when the sum reaches the lowest
 * threshold among them (decided with the batch's writes, gateway/batch.ts), or here, when its oldest held
 * message has waited its maximum hold. Release turns every
 * held row of the chat into `ready`, so light messages ride along with the next heavy one.
 */
export class ImpulseGate {
  private readonly releaseStmt;
  private readonly dueStmt;
  private readonly nextDueStmt;
  private readonly heldStmt;
  private readonly countStmt;

  constructor(db: Db) {
    this.releaseStmt = db.prepare(
      `UPDATE messages SET state = 'ready', ready_at = ? WHERE state = 'held' AND chat_jid = ?`,
    );
    this.dueStmt = db
      .prepare(
        `SELECT DISTINCT chat_jid FROM messages
         WHERE state = 'held' AND held_at + max_hold_ms <= ?`,
      )
      .pluck();
    this.nextDueStmt = db
      .prepare(`SELECT min(held_at + max_hold_ms) FROM messages WHERE state = 'held'`)
      .pluck();
    this.countStmt = db.prepare(`SELECT count(*) FROM messages WHERE state = 'held'`).pluck();
    this.heldStmt = db.prepare(
      `SELECT chat_jid, count(*) AS count, sum(weight) AS weight, min(held_at) AS oldest
       FROM messages WHERE state = 'held' GROUP BY chat_jid ORDER BY oldest LIMIT ?`,
    );
  }

  /** How many messages the gate holds now. */
  heldCount(): number {
    return this.countStmt.get() as number;
  }

  /** Releases every chat whose oldest held message has waited its maximum hold. Returns how many. */
  releaseDue(now: number): number {
    const chats = this.dueStmt.all(now) as string[];
    for (const chat of chats) this.releaseStmt.run(now, chat);
    return chats.length;
  }

  /** Epoch ms of the next max-hold release, or undefined when nothing is held. */
  nextDue(): number | undefined {
    const v = this.nextDueStmt.get() as number | null;
    return v ?? undefined;
  }

  /** Held chats, oldest first (dashboard, metrics). */
  held(limit = 100): { chat_jid: string; count: number; weight: number; oldest: number }[] {
    return this.heldStmt.all(limit) as { chat_jid: string; count: number; weight: number; oldest: number }[];
  }
}
