import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { DEFAULT_BUSY_TIMEOUT_MS, lockOrLater, LOCKED } from '../../store/db.js';
import { freshDb } from '../helpers/db.js';

describe('lockOrLater', () => {
  it('gives up at once while another connection holds the write lock, and runs once it is free', () => {
    const { db, path } = freshDb();
    let calls = 0;
    const write = lockOrLater(db, (content: string) => {
      calls += 1;
      return Number(
        db.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('web:x', 'u', ?)`).run(content)
          .lastInsertRowid,
      );
    });
    const other = new Database(path);
    other.exec('BEGIN IMMEDIATE');
    const started = performance.now();
    expect(write('a')).toBe(LOCKED);
    expect(performance.now() - started).toBeLessThan(500);
    expect(calls).toBe(0);
    expect(db.inTransaction).toBe(false);
    // The connection's own wait is back for every other statement.
    expect(db.pragma('busy_timeout', { simple: true })).toBe(DEFAULT_BUSY_TIMEOUT_MS);
    other.exec('COMMIT');
    const id = write('b');
    expect(id).toEqual(expect.any(Number));
    expect(calls).toBe(1);
    expect(db.prepare('SELECT content FROM messages').pluck().all()).toEqual(['b']);
    // Inside a transaction already open the lock is held: the body runs as a savepoint.
    db.transaction(() => expect(write('c')).toEqual(expect.any(Number)))();
    expect(db.pragma('busy_timeout', { simple: true })).toBe(DEFAULT_BUSY_TIMEOUT_MS);
    other.close();
  });

  it("rethrows the body's own errors, rolled back, with the busy timeout restored", () => {
    const { db } = freshDb();
    const fail = lockOrLater(db, () => {
      db.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('web:x', 'u', 'x')`).run();
      throw new Error('boom');
    });
    expect(() => fail()).toThrow('boom');
    expect(db.prepare('SELECT count(*) FROM messages').pluck().get()).toBe(0);
    expect(db.pragma('busy_timeout', { simple: true })).toBe(DEFAULT_BUSY_TIMEOUT_MS);
  });
});
