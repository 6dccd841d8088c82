import { insertInbound } from '../../store/messages.js';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { applySchema, openDatabase, SCHEMA_VERSION } from '../../store/db.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { join } from 'node:path';

/** The query plan's detail lines for `sql`. */
function plan(db: Database.Database, sql: string, ...params: unknown[]): string {
  return (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[])
    .map((r) => r.detail)
    .join(' | ');
}

describe('schema.sql', () => {
  it('applies idempotently and records its version', () => {
    const { db } = freshDb();
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (1, '', 'a')`).run();
    expect(applySchema(db)).toBe(SCHEMA_VERSION);
    expect(applySchema(db)).toBe(SCHEMA_VERSION);
    expect(db.prepare('SELECT count(*) FROM routes').pluck().get()).toBe(1);
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
  });

  it('refuses a database from a newer gated', () => {
    const path = join(tempDir(), 'new.db');
    const raw = new Database(path);
    raw.pragma('user_version = 99');
    raw.close();
    expect(() => openDatabase(path)).toThrow(/newer than this gated/);
  });

  it('upgrades a version-4 database: messages gains its turn column, rows kept', () => {
    const { db } = freshDb();
    db.exec(`ALTER TABLE messages DROP COLUMN turn`);
    db.pragma('user_version = 4');
    db.prepare(`INSERT INTO messages (chat_jid, content, state) VALUES ('x:1', 'old', 'running')`).run();
    expect(applySchema(db)).toBe(SCHEMA_VERSION);
    expect(db.prepare(`SELECT content, turn FROM messages`).get()).toEqual({ content: 'old', turn: null });
  });

  it('upgrades a version-7 database: drafts are keyed by chat and thread, rows kept', () => {
    const { db } = freshDb();
    db.exec(`DROP TABLE drafts;
      CREATE TABLE drafts (chat_jid TEXT PRIMARY KEY, run_id INTEGER, turn INTEGER, platform_msg_id TEXT,
        text TEXT, final INTEGER NOT NULL DEFAULT 0, updated_at INTEGER)`);
    db.prepare(
      `INSERT INTO drafts (chat_jid, platform_msg_id, text) VALUES ('telegram:1', '77', 'half')`,
    ).run();
    db.pragma('user_version = 7');
    expect(applySchema(db)).toBe(SCHEMA_VERSION);
    expect(db.prepare(`SELECT chat_jid, thread, platform_msg_id, text FROM drafts`).all()).toEqual([
      { chat_jid: 'telegram:1', thread: '', platform_msg_id: '77', text: 'half' },
    ]);
    // Two threads of one chat now have a draft each.
    db.prepare(
      `INSERT INTO drafts (chat_jid, thread, platform_msg_id) VALUES ('telegram:1', '5', '78')`,
    ).run();
    expect(db.prepare(`SELECT count(*) FROM drafts`).pluck().get()).toBe(2);
  });

  it('defaults timestamps to UTC ISO-8601 with milliseconds', () => {
    const { db } = freshDb();
    db.prepare(`INSERT INTO messages (chat_jid, content) VALUES ('x:1', 'hi')`).run();
    const ts = db.prepare('SELECT timestamp FROM messages').pluck().get() as string;
    expect(ts).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it("stores a redelivered platform event once (through the adapters' writer)", () => {
    const { db } = freshDb();
    const ins = (chat_jid: string, platform_msg_id: string | null) =>
      insertInbound(db, { chat_jid, sender: 's', content: 'x', platform_msg_id });
    const first = ins('t:1', 'm1');
    expect(first).toBeTypeOf('number');
    expect(ins('t:1', 'm1')).toBeNull();
    expect(ins('t:2', 'm1')).toBeTypeOf('number');
    expect(ins('t:1', null)).toBeTypeOf('number');
    expect(ins('t:1', null)).toBeTypeOf('number');
    expect(db.prepare('SELECT count(*) FROM messages').pluck().get()).toBe(4);
    // A plain INSERT of the same event (an external adapter without ON CONFLICT) is refused by the index.
    expect(() =>
      db.prepare(`INSERT INTO messages (chat_jid, content, platform_msg_id) VALUES ('t:1', 'x', 'm1')`).run(),
    ).toThrow(/UNIQUE/);
  });

  it('bumps routes_version on every change to routes', () => {
    const { db } = freshDb();
    const v = () =>
      Number(db.prepare(`SELECT value FROM router_state WHERE key = 'routes_version'`).pluck().get());
    const v0 = v();
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (1, '', 'a')`).run();
    db.prepare(`UPDATE routes SET seq = 2`).run();
    db.prepare(`DELETE FROM routes`).run();
    expect(v()).toBe(v0 + 3);
  });

  it('keeps the hot queries on indexes (no full scans)', () => {
    const { db } = freshDb();
    const checks: Array<[string, unknown[], RegExp]> = [
      // the poll, by integer cursor, inbound only
      [
        'SELECT id FROM messages WHERE is_from_me = 0 AND id > ? AND state IS NULL ORDER BY id LIMIT 500',
        [0],
        /idx_messages_unpolled/,
      ],
      // the task scheduler's due tasks and open firings
      [
        `SELECT * FROM tasks WHERE status = 'active' AND next_run_at IS NOT NULL ORDER BY next_run_at`,
        [],
        /idx_tasks_due/,
      ],
      ['SELECT id FROM task_runs WHERE outcome IS NULL', [], /idx_task_runs_open/],
      // a chat's history
      [
        'SELECT id FROM messages WHERE chat_jid = ? ORDER BY id DESC LIMIT 50',
        ['web:demo'],
        /idx_messages_chat/,
      ],
      // the impulse gate's per-chat sum
      [`SELECT sum(weight) FROM messages WHERE state = 'held' AND chat_jid = ?`, ['x'], /idx_messages_held/],
      [
        `UPDATE messages SET state = 'ready' WHERE state = 'held' AND chat_jid = ?`,
        ['x'],
        /idx_messages_held/,
      ],
      // ready lanes in order of readiness
      [
        `SELECT group_folder, session_topic, min(ready_at) FROM messages WHERE state = 'ready' GROUP BY group_folder, session_topic`,
        [],
        /idx_messages_ready/,
      ],
      [
        `SELECT id FROM messages WHERE state = 'ready' ORDER BY ready_at, id LIMIT 10`,
        [],
        /idx_messages_ready_walk/,
      ],
      [
        `SELECT min(not_before) FROM messages WHERE state = 'ready' AND not_before > ?`,
        [1],
        /COVERING INDEX idx_messages_backoff/,
      ],
      [
        `SELECT group_folder FROM messages WHERE state = 'ready' AND group_folder IS NOT NULL AND (not_before IS NULL OR not_before <= ?) ORDER BY ready_at, id`,
        [1],
        /idx_messages_ready_walk/,
      ],
      // the oldest lane of a group without a run, read from the index alone
      [
        `SELECT group_folder, session_topic FROM messages WHERE state = 'ready' AND group_folder IS NOT NULL AND (not_before IS NULL OR not_before <= ?) AND group_folder NOT IN (SELECT value FROM json_each(?)) ORDER BY ready_at, id LIMIT 1`,
        [1, '["a"]'],
        /COVERING INDEX idx_messages_ready_walk/,
      ],
      [`SELECT id FROM messages WHERE state = 'running' AND run_id = ?`, [1], /idx_messages_running/],
      [
        `SELECT id FROM messages WHERE state = 'daemon' AND (not_before IS NULL OR not_before <= ?) ORDER BY id`,
        [1],
        /idx_messages_daemon/,
      ],
      [
        `SELECT DISTINCT chat_jid FROM messages WHERE state = 'held' AND held_at + max_hold_ms <= ?`,
        [1],
        /idx_messages_held/,
      ],
      // a session's ready batch
      [
        `SELECT id FROM messages WHERE state = 'ready' AND group_folder = ? AND session_topic = ? AND chat_jid = ? ORDER BY id`,
        ['g', '', 'x'],
        /idx_messages_ready/,
      ],
      // the chat a dispatch takes (store/queue-sql.ts oldestChat): from the indexes alone, no table row read
      [
        `SELECT chat_jid FROM messages WHERE state = 'ready' AND group_folder = ? AND session_topic = ? AND id NOT IN (
           SELECT id FROM messages WHERE state = 'ready' AND not_before IS NOT NULL AND not_before > ?)
         ORDER BY id LIMIT 1`,
        ['g', '', 1],
        /COVERING INDEX idx_messages_ready \(group_folder=\? AND session_topic=\?\)[\s\S]*COVERING INDEX idx_messages_backoff/,
      ],
      // the outbox of a chat
      [
        `SELECT id FROM messages WHERE is_from_me = 1 AND delivery = 'pending' AND chat_jid = ? ORDER BY id`,
        ['x'],
        /idx_messages_outbox/,
      ],
      // dedup of a platform event
      [
        'SELECT id FROM messages WHERE chat_jid = ? AND platform_msg_id = ?',
        ['x', 'y'],
        /idx_messages_platform|idx_messages_chat/,
      ],
      // the inbox's next downloads: pending attachments in id order, not a walk of every file ever stored
      [
        `SELECT a.*, m.chat_jid, m.group_folder FROM attachments a JOIN messages m ON m.id = a.message_id
         WHERE a.state = 'pending' AND m.group_folder IS NOT NULL
           AND (m.state IS NULL OR m.state NOT IN ('denied', 'pending', 'limited'))
           AND (a.not_before IS NULL OR a.not_before <= ?) ORDER BY a.id LIMIT ?`,
        [1, 10],
        /SCAN a USING INDEX idx_attachments_due/,
      ],
      // routes in order
      ['SELECT * FROM routes ORDER BY seq', [], /idx_routes_seq/],
      // session log of a key
      [
        'SELECT * FROM session_log WHERE group_folder = ? AND topic = ? ORDER BY id DESC LIMIT 10',
        ['g', ''],
        /idx_session_log_key/,
      ],
    ];
    for (const [sql, params, want] of checks) {
      const p = plan(db, sql, ...params);
      expect(p, sql).toMatch(want);
      expect(p, sql).not.toMatch(/^SCAN messages$|SCAN messages(?! USING)/);
    }
  });
});
