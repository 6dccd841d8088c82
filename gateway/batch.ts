import type { Message } from '../core/types.js';
import type { Db } from '../store/db.js';
import type { Sticky, StickyStore } from '../store/state.js';

/**
 * The writes of one poll batch that are cheaper per batch than per row (issue 30): a plain message (text
 * for a group's agent) writes nothing while the steps look at it. Its route's hit is counted in memory, and
 * its row is placed once, after the rows, with the gate's decision already in it: `ready` when its chat is
 * released, else `held`. So a plain row needs no savepoint: when a step throws, nothing of it was written.
 *
 * A row that may write more (a sticky or command message, an answer to the chat, an access decision that
 * issues a code or counts the sender's rows) calls `guard()` first: the rows placed so far are written as
 * held (the gate weighs them from the table after the rows, as before), and the row gets its savepoint, so a
 * throw rolls back that row alone: a row that cannot be processed ends `failed`, alone, and the rest of the
 * batch goes on (docs/OPERATIONS.md, "Hostile rows").
 */

/** The gate's columns of one routed row (held, released at once, or withheld by access). */
export interface Placement {
  id: number;
  state: string;
  error: string | null;
  held_at: number | null;
  group: string;
  topic: string;
  content: string | null;
  target: string;
  route_id: number | null;
  weight: number;
  interrupts: 1 | null;
  /** 1: the row counts toward its group's messages per sender per hour (the group has that limit). */
  counted: 1 | null;
  threshold: number;
  max_hold_ms: number;
}

interface Placed {
  msg: Message;
  p: Placement;
}

/** The batch statements, prepared once per pipeline. */
export class BatchStatements {
  readonly savepoint;
  readonly release;
  readonly rollbackTo;
  /**
   * One placed row. A statement per row, not one for the batch: SQLite takes about 5 µs a row this way and
   * 8.5 µs through one UPDATE joined to json_each of the batch (its ->> reads parse each row's JSON again).
   */
  readonly place;
  /** The batch's route hits, one upsert for all routes (a JSON object route id → hits). */
  readonly hits;
  /** The held rows already in the table of the chats a batch held rows for (JSON array of chats). */
  readonly heldSums;
  readonly releaseChat;

  constructor(readonly db: Db) {
    this.savepoint = db.prepare('SAVEPOINT gated_row');
    this.release = db.prepare('RELEASE gated_row');
    this.rollbackTo = db.prepare('ROLLBACK TO gated_row');
    this.place = db.prepare(
      `UPDATE messages SET state = ?, group_folder = ?, session_topic = ?, agent_content = ?, target = ?,
         route_id = ?, weight = ?, threshold = ?, max_hold_ms = ?, held_at = ?, ready_at = ?, error = NULL,
         interrupts = ?, counted = ?
       WHERE id = ?`,
    );
    this.hits = db.prepare(
      `INSERT INTO route_hits (route_id, hits, last_hit_at)
         SELECT CAST(key AS INTEGER), value, ? FROM json_each(?) WHERE true
       ON CONFLICT (route_id) DO UPDATE SET hits = hits + excluded.hits, last_hit_at = excluded.last_hit_at`,
    );
    this.heldSums = db.prepare(
      `SELECT chat_jid, sum(weight) AS total, min(threshold) AS threshold FROM messages
       WHERE state = 'held' AND chat_jid IN (SELECT value FROM json_each(?)) GROUP BY chat_jid`,
    );
    this.releaseChat = db.prepare(
      `UPDATE messages SET state = 'ready', ready_at = ? WHERE state = 'held' AND chat_jid = ?`,
    );
  }
}

/** A row of the poll with its chat's sticky state read along (gateway/loop.ts); absent: not read. */
export type PolledRow = Message & {
  sticky_group?: string | null;
  sticky_topic?: string | null;
  /** 1 when the row waits for files (its `not_before` set by insertAttachments): routed, the inbox is woken. */
  waits_files?: number | null;
};

/** One batch in progress: see the top of this file. Made per poll batch, inside its transaction. */
export class BatchWork {
  private guarded = false;
  /** finish() ran: the rows are written, and nothing of the batch is written again. */
  private finished = false;
  private rowHit: number | undefined;
  private rowPlaced: Placed | undefined;
  private readonly hits = new Map<number, number>();
  private placed: Placed[] = [];
  private readonly stickies = new Map<string, Sticky>();
  /** The chats' sticky state for the layers, read once per chat and batch (kept as the batch changes it). */
  readonly sticky: Pick<StickyStore, 'get' | 'setGroup' | 'setTopic'>;

  constructor(
    private readonly s: BatchStatements,
    store: StickyStore,
    private readonly now: number,
    /** Ends a row that cannot be written, with its error (the pipeline's `fail`). */
    private readonly fail: (msg: Message, err: unknown) => void,
  ) {
    const stickies = this.stickies;
    this.sticky = {
      get: (chat) => {
        let st = stickies.get(chat);
        if (!st) stickies.set(chat, (st = store.get(chat)));
        return st;
      },
      setGroup: (chat, group) => {
        store.setGroup(chat, group);
        stickies.set(chat, { ...this.sticky.get(chat), group });
      },
      setTopic: (chat, topic) => {
        store.setTopic(chat, topic);
        stickies.set(chat, { ...this.sticky.get(chat), topic });
      },
    };
  }

  /** A row starts: its chat's sticky state, when the poll read it along, is known without a read. */
  beginRow(row: PolledRow): void {
    if (row.sticky_group === undefined || this.stickies.has(row.chat_jid)) return;
    this.stickies.set(row.chat_jid, { group: row.sticky_group, topic: row.sticky_topic ?? null });
  }

  /**
   * Before the row writes anything but its own placement, or reads what earlier rows of the batch wrote:
   * the rows placed so far are written (held), and the row gets a savepoint. Once per row.
   */
  guard(): void {
    // After finish() the batch's rows are written: a command's effect that answers once the batch committed
    // (an /interrupt's reply) must not write them again, as held, over their released state.
    if (this.guarded || this.finished) return;
    this.write(this.placed, () => ({ state: 'held', readyAt: null }));
    this.placed = [];
    this.s.savepoint.run();
    this.guarded = true;
  }

  /** The route that matched the row: counted when the row ends well. */
  hit(routeId: number): void {
    this.rowHit = routeId;
  }

  /** The row is held for the gate: written after the rows, held or already released. */
  hold(msg: Message, p: Placement): void {
    this.rowPlaced = { msg, p };
  }

  /** The row went through: its savepoint (if any) is released, its hit and placement kept. */
  rowDone(): void {
    if (this.guarded) this.s.release.run();
    this.guarded = false;
    if (this.rowHit !== undefined) this.hits.set(this.rowHit, (this.hits.get(this.rowHit) ?? 0) + 1);
    if (this.rowPlaced) this.placed.push(this.rowPlaced);
    this.rowHit = undefined;
    this.rowPlaced = undefined;
  }

  /** The row threw: what it wrote is rolled back (it wrote only after `guard()`), the rest forgotten. */
  rowFailed(): void {
    if (this.guarded) {
      this.s.rollbackTo.run();
      this.s.release.run();
    }
    this.guarded = false;
    this.rowHit = undefined;
    this.rowPlaced = undefined;
    // A rolled-back sticky change must not be seen by the rows after it.
    this.stickies.clear();
  }

  /**
   * After the rows: the gate, then the route hits in one statement. For each chat that got a held row, the
   * weights already held in the table and the batch's own add up; a chat that reaches its threshold is
   * released, so its new rows are written `ready` at once and its older held rows become ready. Returns the
   * chats released.
   */
  finish(chats: ReadonlySet<string>, onGateError: (err: unknown) => void): number {
    const released = this.gate(chats, onGateError);
    this.placed = [];
    this.finished = true;
    if (this.hits.size > 0) {
      this.s.hits.run(new Date(this.now).toISOString(), JSON.stringify(Object.fromEntries(this.hits)));
    }
    return released;
  }

  private gate(chats: ReadonlySet<string>, onGateError: (err: unknown) => void): number {
    if (chats.size === 0) return 0;
    let inTable: Map<string, { total: number | null; threshold: number | null }>;
    try {
      const rows = this.s.heldSums.all(JSON.stringify([...chats])) as Array<{
        chat_jid: string;
        total: number | null;
        threshold: number | null;
      }>;
      inTable = new Map(rows.map((r) => [r.chat_jid, r]));
    } catch (err) {
      if (!this.s.db.inTransaction) throw err;
      // The chats' rows stay held; the next tick or the maximum hold releases them.
      onGateError(err);
      this.write(this.placed, () => ({ state: 'held', readyAt: null }));
      return 0;
    }
    // A chat is released when its held weights reach the lowest threshold among its held rows.
    const sums = new Map<string, { total: number; threshold: number | null }>();
    for (const [chat, t] of inTable) sums.set(chat, { total: t.total ?? 0, threshold: t.threshold });
    for (const { msg, p } of this.placed) {
      const s = sums.get(msg.chat_jid) ?? { total: 0, threshold: null };
      s.total += p.weight;
      s.threshold = s.threshold === null ? p.threshold : Math.min(s.threshold, p.threshold);
      sums.set(msg.chat_jid, s);
    }
    const released = new Set<string>();
    for (const [chat, s] of sums) if (s.threshold !== null && s.total >= s.threshold) released.add(chat);
    this.write(this.placed, (msg) =>
      released.has(msg.chat_jid) ? { state: 'ready', readyAt: this.now } : { state: 'held', readyAt: null },
    );
    for (const chat of released) if (inTable.has(chat)) this.s.releaseChat.run(this.now, chat);
    return released.size;
  }

  private unhit(route: number | null): void {
    const n = route === null ? undefined : this.hits.get(route);
    if (route === null || n === undefined) return;
    if (n > 1) this.hits.set(route, n - 1);
    else this.hits.delete(route);
  }

  /** Writes placed rows, each alone: a row the database refuses fails alone and the others go on. */
  private write(rows: readonly Placed[], gate: (msg: Message) => { state: string; readyAt: number | null }) {
    for (const r of rows) {
      const { p } = r;
      const g = gate(r.msg);
      try {
        this.s.place.run(
          g.state,
          p.group,
          p.topic,
          p.content,
          p.target,
          p.route_id,
          p.weight,
          p.threshold,
          p.max_hold_ms,
          p.held_at,
          g.readyAt,
          p.interrupts,
          p.counted,
          p.id,
        );
      } catch (err) {
        // A failure that ended the transaction (a full disk) fails the batch; anything else is one row's.
        if (!this.s.db.inTransaction) throw err;
        // The row ends failed: its route's hit goes with it.
        this.unhit(r.p.route_id);
        this.fail(r.msg, err);
      }
    }
  }
}
