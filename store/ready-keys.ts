import { sessionKeyId } from '../core/types.js';
import type { Db } from './db.js';

const READY = `FROM messages WHERE state = 'ready'`;

/** The statements of ReadyKeys, each one seek in idx_messages_ready (test/store/ready-keys.test.ts). */
export const READY_KEYS_SQL = {
  first: `SELECT group_folder AS g, session_topic AS t ${READY} AND group_folder IS NOT NULL
          ORDER BY group_folder, session_topic LIMIT 1`,
  /** The first key of the next group after ?. */
  nextGroup: `SELECT group_folder AS g, session_topic AS t ${READY} AND group_folder > ?
              ORDER BY group_folder, session_topic LIMIT 1`,
  /** The next topic of group ? after ?; NULL sorts first, so after a NULL topic comes any other. */
  nextTopic: `SELECT session_topic ${READY} AND group_folder = ? AND session_topic > ?
              ORDER BY session_topic LIMIT 1`,
  afterNull: `SELECT session_topic ${READY} AND group_folder = ? AND session_topic IS NOT NULL
              ORDER BY session_topic LIMIT 1`,
} as const;

type Key = { g: string; t: string | null } | undefined;

/**
 * Counts the session keys that have ready rows by skipping through idx_messages_ready (group_folder,
 * session_topic, …) from one key to the next: a few index seeks per key, however many rows each key has
 * waiting. A GROUP BY over the ready rows read all of them (a 100,000-message backlog: tens of ms on the
 * event loop at every look of the lane gauges).
 */
export class ReadyKeys {
  private readonly s;

  constructor(db: Db) {
    this.s = {
      first: db.prepare(READY_KEYS_SQL.first),
      nextGroup: db.prepare(READY_KEYS_SQL.nextGroup),
      nextTopic: db.prepare(READY_KEYS_SQL.nextTopic).pluck(),
      afterNull: db.prepare(READY_KEYS_SQL.afterNull).pluck(),
    };
  }

  /**
   * How many keys have ready rows, leaving out those `skip` names by their sessionKeyId. A NULL topic and
   * '' are one key, as everywhere in the queue.
   */
  count(skip: (keyId: string) => boolean = () => false): number {
    let n = 0;
    let row = this.s.first.get() as Key;
    while (row !== undefined) {
      const group = row.g;
      let topic: string | null | undefined = row.t;
      let last: string | undefined;
      while (topic !== undefined) {
        const id = sessionKeyId({ group, topic: topic ?? '' });
        if (id !== last && !skip(id)) n += 1;
        last = id;
        topic = (topic === null ? this.s.afterNull.get(group) : this.s.nextTopic.get(group, topic)) as
          string | null | undefined;
      }
      row = this.s.nextGroup.get(group) as Key;
    }
    return n;
  }
}
