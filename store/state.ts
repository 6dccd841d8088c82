import type { Db } from './db.js';

/**
 * router_state as a small key-value store: the poll cursor, the Telegram offset, the Bluesky seen cursor,
 * the owner lock and other gateway state. Statements are prepared once per database.
 */
export class StateStore {
  private readonly getStmt;
  private readonly setStmt;
  private readonly deleteStmt;

  constructor(db: Db) {
    this.getStmt = db.prepare('SELECT value FROM router_state WHERE key = ?').pluck();
    this.setStmt = db.prepare(
      'INSERT INTO router_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
    );
    this.deleteStmt = db.prepare('DELETE FROM router_state WHERE key = ?');
  }

  /** The value of `key`, or undefined when it was never written. */
  get(key: string): string | undefined {
    return (this.getStmt.get(key) as string | null | undefined) ?? undefined;
  }

  /** Writes `key` (inside the caller's transaction when there is one). */
  set(key: string, value: string): void {
    this.setStmt.run(key, value);
  }

  /** Removes `key`. */
  delete(key: string): void {
    this.deleteStmt.run(key);
  }
}

/** router_state key of the poll loop's cursor: the id of the last inbound row it processed (gateway/loop.ts). */
export const POLL_CURSOR_KEY = 'poll_cursor';

const behindStmts = new WeakMap<Db, { get(): unknown }>();

/**
 * True when inbound rows are stored after the poll loop's cursor and not placed yet (the loop has them to
 * read): a seek on the rowid range after the cursor, one row at most.
 */
export function rowsAfterPollCursor(db: Db): boolean {
  let stmt = behindStmts.get(db);
  if (!stmt)
    behindStmts.set(
      db,
      (stmt = db
        .prepare(
          `SELECT 1 FROM messages WHERE is_from_me = 0 AND state IS NULL
             AND id > coalesce((SELECT CAST(value AS INTEGER) FROM router_state WHERE key = '${POLL_CURSOR_KEY}'), 0)
           LIMIT 1`,
        )
        .pluck()),
    );
  return stmt.get() !== undefined;
}

const stores = new WeakMap<Db, StateStore>();

/** The StateStore of a database, made on first use and kept as long as the connection lives. */
export function stateOf(db: Db): StateStore {
  let store = stores.get(db);
  if (!store) stores.set(db, (store = new StateStore(db)));
  return store;
}

/**
 * router_state key of a platform bot's own username, written by its channel when it starts (Telegram's
 * getMe): a gateway whose channel runs in another process still knows which `/cmd@bot` is its own.
 */
export function botUsernameKey(platform: string): string {
  return `${platform}.username`;
}

/** Reads a router_state value. */
export function getState(db: Db, key: string): string | undefined {
  return stateOf(db).get(key);
}

/** Writes a router_state value (inside the caller's transaction when there is one). */
export function setState(db: Db, key: string, value: string): void {
  stateOf(db).set(key, value);
}

/** A chat's sticky group and topic (layer 1). */
export interface Sticky {
  group: string | null;
  topic: string | null;
}

/** Reads and writes chat_state with statements prepared once. */
export class StickyStore {
  private readonly getStmt;
  private readonly setGroupStmt;
  private readonly setTopicStmt;

  constructor(db: Db) {
    this.getStmt = db.prepare(
      'SELECT sticky_group AS "group", sticky_topic AS topic FROM chat_state WHERE chat_jid = ?',
    );
    const upsert = (col: string) =>
      db.prepare(
        `INSERT INTO chat_state (chat_jid, ${col}) VALUES (?, ?)
         ON CONFLICT (chat_jid) DO UPDATE SET ${col} = excluded.${col},
           updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`,
      );
    this.setGroupStmt = upsert('sticky_group');
    this.setTopicStmt = upsert('sticky_topic');
  }

  get(chatJid: string): Sticky {
    return (this.getStmt.get(chatJid) as Sticky | undefined) ?? { group: null, topic: null };
  }

  setGroup(chatJid: string, group: string | null): void {
    this.setGroupStmt.run(chatJid, group);
  }

  setTopic(chatJid: string, topic: string | null): void {
    this.setTopicStmt.run(chatJid, topic);
  }
}
