import type { SessionKey } from '../core/types.js';
import type { Db } from './db.js';

/**
 * The `sessions` rows (one agent session id per session key) and the notes for a session's next prompt
 * (`system_messages`), for the gateway's commands. Statements are prepared once per database; the queue
 * keeps its own for the run path.
 */
export class SessionStore {
  private readonly getStmt;
  private readonly dropStmt;
  private readonly noteStmt;
  private readonly forkStmt;

  constructor(db: Db) {
    this.getStmt = db.prepare('SELECT session_id FROM sessions WHERE group_folder = ? AND topic = ?').pluck();
    this.dropStmt = db.prepare('DELETE FROM sessions WHERE group_folder = ? AND topic = ?');
    this.noteStmt = db.prepare('INSERT INTO system_messages (group_folder, topic, content) VALUES (?, ?, ?)');
    // A topic that once had a session or an answer is not new: after `/new #topic` it starts fresh.
    this.forkStmt = db
      .prepare(
        `SELECT session_id FROM sessions WHERE group_folder = @group AND topic = ''
           AND NOT EXISTS (SELECT 1 FROM sessions WHERE group_folder = @group AND topic = @topic)
           AND NOT EXISTS (SELECT 1 FROM session_log WHERE group_folder = @group AND topic = @topic
                             AND (session_id IS NOT NULL OR replies > 0))`,
      )
      .pluck();
  }

  /** The stored agent session id of `key`, if any. */
  get(key: SessionKey): string | undefined {
    return (this.getStmt.get(key.group, key.topic) as string | null | undefined) ?? undefined;
  }

  /**
   * The session a topic's first run may fork: the group's default session, when `key` is a topic that has
   * no session and never had one or an answer. Undefined otherwise (and always for the default topic).
   */
  forkSource(key: SessionKey): string | undefined {
    if (key.topic === '') return undefined;
    return (this.forkStmt.get({ group: key.group, topic: key.topic }) as string | undefined) ?? undefined;
  }

  /** Forgets the session of `key`: its next run starts fresh. True when there was one. */
  drop(key: SessionKey): boolean {
    return this.dropStmt.run(key.group, key.topic).changes > 0;
  }

  /** Leaves a note that the session of `key` finds in its next prompt. */
  note(key: SessionKey, content: string): void {
    this.noteStmt.run(key.group, key.topic, content);
  }
}

const stores = new WeakMap<Db, SessionStore>();

/** The SessionStore of a database, made on first use. */
export function sessionsOf(db: Db): SessionStore {
  let store = stores.get(db);
  if (!store) stores.set(db, (store = new SessionStore(db)));
  return store;
}
