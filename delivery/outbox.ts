import type { Db } from '../store/db.js';
import { committed, flushGroup, writableNow } from '../store/group-commit.js';

/** One undelivered outbound row, as delivery needs it. */
export interface OutboxRow {
  id: number;
  chat_jid: string;
  content: string;
  reply_to: string | null;
  topic: string;
  parts_sent: number;
  delivery_attempts: number;
  /** When the row was stored (its `timestamp`): part of each part's idempotency key. */
  created_at: string;
  /** reply, gateway, error, status, send, or reaction (content is an emoji for the message reply_to). */
  kind: string | null;
  /** The inbound messages.id this row answers (its trace), if any. */
  reply_to_id: number | null;
  /** 1 when outbound_files has rows of it (0: its files are not read; most replies name none). */
  has_files: number;
}

/**
 * The outbox in SQL: undelivered replies (is_from_me = 1, delivery = 'pending') and the bookkeeping that
 * makes delivery resumable. Statements are prepared once; every write is one short transaction that never
 * spans an await, so a crash leaves either the part recorded or not, never half of it.
 */
export class Outbox {
  private readonly chatsStmt;
  private readonly nextStmt;
  private readonly lastPartStmt;
  private readonly insertPartStmt;
  private readonly bumpPartsStmt;
  private readonly lastPartSentStmt;
  private readonly sentStmt;
  private readonly failedStmt;
  private readonly attemptStmt;
  private readonly recordPartTx;

  constructor(private readonly db: Db) {
    this.chatsStmt = db.prepare(
      `SELECT DISTINCT chat_jid FROM messages WHERE is_from_me = 1 AND delivery = 'pending'`,
    );
    // Named: the planner takes idx_messages_chat (the same leading columns, and no statistics say which is
    // smaller), which walks the chat's whole history for its one pending row.
    this.nextStmt = db.prepare(
      `SELECT id, chat_jid, content, reply_to, topic, parts_sent, delivery_attempts, timestamp AS created_at,
              kind, reply_to_id,
              EXISTS (SELECT 1 FROM outbound_files f WHERE f.message_id = messages.id) AS has_files
       FROM messages INDEXED BY idx_messages_outbox
       WHERE is_from_me = 1 AND delivery = 'pending' AND chat_jid = ? ORDER BY id LIMIT 1`,
    );
    this.lastPartStmt = db.prepare(
      `SELECT platform_msg_id FROM outbound_parts WHERE message_id = ? AND part < ?
       ORDER BY part DESC LIMIT 1`,
    );
    this.insertPartStmt = db.prepare(
      `INSERT INTO outbound_parts (message_id, part, platform_msg_id) VALUES (?, ?, ?)`,
    );
    // The parts_sent guard makes a second writer (or a replayed call) a no-op instead of a double count.
    this.bumpPartsStmt = db.prepare(
      `UPDATE messages SET parts_sent = ? + 1, delivery_error = NULL
       WHERE id = ? AND parts_sent = ? AND delivery = 'pending'`,
    );
    // The last part: counted and the row delivered in one UPDATE, with the same guard.
    this.lastPartSentStmt = db.prepare(
      `UPDATE messages SET parts_sent = ? + 1, delivery_error = NULL, delivery = 'sent',
         delivered_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
       WHERE id = ? AND parts_sent = ? AND delivery = 'pending'`,
    );
    this.sentStmt = db.prepare(
      `UPDATE messages SET delivery = 'sent', delivered_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
       WHERE id = ? AND delivery = 'pending'`,
    );
    this.failedStmt = db.prepare(
      `UPDATE messages SET delivery = 'failed', delivery_error = ?, delivery_attempts = delivery_attempts + ?
       WHERE id = ? AND delivery = 'pending'`,
    );
    this.attemptStmt = db.prepare(
      `UPDATE messages SET delivery_attempts = delivery_attempts + 1, delivery_error = ? WHERE id = ?`,
    );
    this.recordPartTx = db.transaction(
      (id: number, part: number, platformId: string | null, last: boolean): boolean => {
        const bump = last ? this.lastPartSentStmt : this.bumpPartsStmt;
        if (bump.run(part, id, part).changes !== 1) return false;
        this.insertPartStmt.run(id, part, platformId);
        return true;
      },
    );
  }

  /** Chats with at least one undelivered row. */
  pendingChats(): string[] {
    return (this.chatsStmt.all() as Array<{ chat_jid: string }>).map((r) => r.chat_jid);
  }

  /** The oldest undelivered row of a chat, if any. */
  next(chatJid: string): OutboxRow | undefined {
    return this.nextStmt.get(chatJid) as OutboxRow | undefined;
  }

  /** The platform id of the last part sent before `part` (Bluesky threads a part under the previous one). */
  previousPartId(messageId: number, part: number): string | null {
    const row = this.lastPartStmt.get(messageId, part) as { platform_msg_id: string | null } | undefined;
    return row?.platform_msg_id ?? null;
  }

  /**
   * Records that the platform accepted `part` (and, for the last part, that the row is delivered), in one
   * transaction. False when the row moved on meanwhile (another writer, an operator edit): the caller stops.
   */
  recordPart(messageId: number, part: number, platformId: string | null, last: boolean): boolean {
    const recorded = this.recordPartTx.immediate(messageId, part, platformId, last);
    // Durable now, as without group commit: until it commits, a crash sends the part again.
    flushGroup(this.db);
    return recorded;
  }

  /**
   * True when `recordPart` can write now without waiting for another process's write lock, else a promise
   * of when it can (store/group-commit.ts `writableNow`): a delivery awaits it, so the event loop never
   * sleeps in SQLite's busy handler.
   */
  writable(): true | Promise<void> {
    return writableNow(this.db);
  }

  /**
   * Resolves once every row this connection wrote so far is committed (undefined when they are): a send
   * waits for it, so a platform never gets a reply whose row a crash could still take back.
   */
  committed(): Promise<void> | undefined {
    return committed(this.db);
  }

  /** Marks a row delivered without sending (every part was recorded before, yet it was still pending). */
  markSent(messageId: number): void {
    this.sentStmt.run(messageId);
  }

  /** Marks a row as permanently undeliverable; it is never tried again unless an operator resets it. */
  markFailed(messageId: number, error: string, countAttempt: boolean): void {
    this.failedStmt.run(error, countAttempt ? 1 : 0, messageId);
  }

  /** Counts one failed attempt that will be retried, with its reason. */
  recordAttempt(messageId: number, error: string): void {
    this.attemptStmt.run(error, messageId);
  }
}
