import type Database from 'better-sqlite3';
import type { Db } from './db.js';

const retryStatements = new WeakMap<Db, Database.Statement<[number, string]>>();

/**
 * Puts a chat's parked rows (their session failed repeatedly) back in the queue now, with their attempts
 * reset, as if the chat had written again. Returns how many rows moved. The queue must be woken after.
 */
export function retryParked(db: Db, chatJid: string, now: number): number {
  let stmt = retryStatements.get(db);
  if (!stmt) {
    stmt = db.prepare<[number, string]>(
      `UPDATE messages SET state = 'ready', attempts = 0, not_before = NULL, ready_at = ?
        WHERE chat_jid = ? AND state = 'parked'`,
    );
    retryStatements.set(db, stmt);
  }
  return stmt.run(now, chatJid).changes;
}
