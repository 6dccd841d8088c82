import { describe, expect, it } from 'vitest';
import { sessionKeyId } from '../../core/types.js';
import { QueueStore } from '../../store/queue.js';
import { READY_KEYS_SQL, ReadyKeys } from '../../store/ready-keys.js';
import { freshDb } from '../helpers/db.js';

describe('ReadyKeys', () => {
  it('counts the keys with ready rows as the GROUP BY of the lanes does, NULL and empty topics as one', () => {
    const { db } = freshDb();
    const insert = db.prepare(
      `INSERT INTO messages (chat_jid, sender, content, state, group_folder, session_topic, not_before)
       VALUES (?, 'u', 'x', ?, ?, ?, ?)`,
    );
    const keys = new ReadyKeys(db);
    const store = new QueueStore(db, 100_000);
    const now = Date.now();
    expect(keys.count()).toBe(0);
    const rows: Array<[string, string | null, string | null, number | null]> = [
      ['ready', 'a', null, null],
      ['ready', 'a', '', null],
      ['ready', 'a', null, null],
      ['ready', 'a', 'x', null],
      ['ready', 'a', 'y', now + 60_000], // in a backoff: still a waiting lane
      ['ready', 'a/b', null, null],
      ['ready', 'a0', 'z', null],
      ['ready', 'b', 'x', null],
      ['ready', 'b', 'x', null],
      ['ready', null, null, null], // no group: never a lane
      ['held', 'c', null, null],
      ['running', 'd', null, null],
      ['done', 'e', 'x', null],
    ];
    rows.forEach(([state, group, topic, notBefore], i) =>
      insert.run(`web:${i % 3}`, state, group, topic, notBefore),
    );
    const summaries = store.summaries(now);
    expect(summaries.map((s) => s.keyId)).toHaveLength(6);
    expect(keys.count()).toBe(summaries.length);
    const skip = new Set([sessionKeyId({ group: 'a', topic: '' }), sessionKeyId({ group: 'b', topic: 'x' })]);
    expect(keys.count((id) => skip.has(id))).toBe(4);
  });

  it('seeks through idx_messages_ready: the cost is per key, not per ready row', () => {
    const { db } = freshDb();
    const insert = db.prepare(
      `INSERT INTO messages (chat_jid, sender, content, state, group_folder, session_topic)
       VALUES ('web:x', 'u', 'x', 'ready', ?, ?)`,
    );
    db.transaction(() => {
      for (let i = 0; i < 3000; i++) insert.run(`g${i % 3}`, i % 2 ? 't' : null);
    })();
    for (const [name, sql] of Object.entries(READY_KEYS_SQL)) {
      const params = sql.split('?').length - 1;
      const detail = (
        db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...['g1', 't'].slice(0, params)) as { detail: string }[]
      )
        .map((r) => r.detail)
        .join(' | ');
      expect(detail, name).toMatch(/SEARCH messages USING (COVERING )?INDEX idx_messages_ready \(/);
      expect(detail, name).not.toMatch(/TEMP B-TREE/);
    }
    expect(new ReadyKeys(db).count()).toBe(6);
  });
});
