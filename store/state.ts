import type { Db } from './db.js';

/** Reads a router_state value. */
export function getState(db: Db, key: string): string | undefined {
  const row = db.prepare('SELECT value FROM router_state WHERE key = ?').get(key) as
    { value: string } | undefined;
  return row?.value;
}

/** Writes a router_state value (inside the caller's transaction when there is one). */
export function setState(db: Db, key: string, value: string): void {
  db.prepare(
    'INSERT INTO router_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
  ).run(key, value);
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
