import { setImmediate as nextTurn } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_BUSY_TIMEOUT_MS, lockOrLater, LOCKED, type Db } from '../../store/db.js';
import {
  committed,
  flushGroup,
  grouped,
  groupCommitOf,
  startGroupCommit,
  turnWorkMs,
  type GroupCommit,
} from '../../store/group-commit.js';
import { freshDb } from '../helpers/db.js';

/** A fresh database with group commit on, a second connection (another process's view) and the failures. */
function setup() {
  const { db, path } = freshDb();
  const failures: Error[] = [];
  const group = startGroupCommit(db, { onFailed: (err) => failures.push(err) });
  const other = new Database(path);
  others.push(other);
  const insert = grouped(db, (content: string) => {
    const id = db
      .prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('web:x', 'u', ?)`)
      .run(content).lastInsertRowid;
    if (content === 'bad') throw new Error('a bad row');
    return Number(id);
  });
  const seen = () => other.prepare('SELECT content FROM messages ORDER BY id').pluck().all() as string[];
  return { db, path, group, failures, other, insert, seen };
}

const others: Database.Database[] = [];
afterEach(() => {
  vi.useRealTimers();
  for (const o of others.splice(0)) o.close();
});

describe('group commit', () => {
  it('commits the writes of one turn once, at its end, with a throwing write rolled back alone', async () => {
    const { db, group, insert, seen, failures } = setup();
    const before = group.commits;
    insert('a');
    expect(() => insert('bad')).toThrow('a bad row');
    insert('b');
    // Written in this connection (its reads see them), not committed yet: no other connection sees them.
    expect(db.prepare('SELECT count(*) FROM messages').pluck().get()).toBe(2);
    expect(seen()).toEqual([]);
    expect(group.isOpen).toBe(true);
    await nextTurn();
    expect(seen()).toEqual(['a', 'b']);
    expect(group.commits - before).toBe(1);
    expect(group.isOpen).toBe(false);
    expect(db.inTransaction).toBe(false);
    // The next turn's writes are a group of their own.
    insert('c');
    await nextTurn();
    expect(seen()).toEqual(['a', 'b', 'c']);
    expect(group.commits - before).toBe(2);
    expect(failures).toEqual([]);
  });

  it('flush commits now; committed() resolves after the COMMIT and is undefined with none open', async () => {
    const { group, insert, seen, db } = setup();
    expect(committed(db)).toBeUndefined();
    insert('a');
    let done = false;
    const waiting = committed(db)!.then(() => (done = true));
    await Promise.resolve();
    expect(done).toBe(false);
    flushGroup(db);
    expect(seen()).toEqual(['a']);
    await waiting;
    expect(done).toBe(true);
    expect(group.isOpen).toBe(false);
    // Without group commit on a connection, every helper is a no-op.
    const plain = freshDb().db;
    expect(groupCommitOf(plain)).toBeUndefined();
    expect(committed(plain)).toBeUndefined();
    grouped(plain, () => plain.prepare(`INSERT INTO router_state (key, value) VALUES ('k', 'v')`).run())();
    expect(plain.inTransaction).toBe(false);
  });

  it("tells how long the turn's open group has been writing: 0 without one", async () => {
    const { db, insert } = setup();
    expect(turnWorkMs(db)).toBe(0);
    insert('a');
    const until = performance.now() + 5;
    while (performance.now() < until);
    expect(turnWorkMs(db)).toBeGreaterThanOrEqual(5);
    await nextTurn();
    expect(turnWorkMs(db)).toBe(0);
    expect(turnWorkMs(freshDb().db)).toBe(0);
  });

  it("is not held back by a test's fake clock", async () => {
    const { insert, seen } = setup();
    vi.useFakeTimers();
    insert('a');
    vi.useRealTimers();
    await nextTurn();
    expect(seen()).toEqual(['a']);
  });

  it('a transaction function of its own inside the group is a savepoint; outside one it commits itself', async () => {
    const { db, insert, seen } = setup();
    const own = db.transaction(() => {
      db.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('web:x', 'u', 'own')`).run();
    });
    own();
    expect(seen()).toEqual(['own']);
    insert('a');
    own();
    expect(seen()).toEqual(['own']);
    await nextTurn();
    expect(seen()).toEqual(['own', 'a', 'own']);
  });

  it('lockOrLater opens the group with its short wait: LOCKED while another process holds the lock', async () => {
    const { db, group, other, seen } = setup();
    const write = lockOrLater(db, () =>
      db.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('web:x', 'u', 'polled')`).run(),
    );
    other.exec('BEGIN IMMEDIATE');
    const t0 = performance.now();
    expect(write()).toBe(LOCKED);
    expect(performance.now() - t0).toBeLessThan(500);
    expect(group.isOpen).toBe(false);
    expect(db.pragma('busy_timeout', { simple: true })).toBe(DEFAULT_BUSY_TIMEOUT_MS);
    other.exec('COMMIT');
    expect(write()).not.toBe(LOCKED);
    expect(group.isOpen).toBe(true);
    expect(seen()).toEqual([]);
    await nextTurn();
    expect(seen()).toEqual(['polled']);
  });

  it('a failed COMMIT rolls the group back, rejects its waiters and is reported; the next turn goes on', async () => {
    const { db, group, insert, seen, failures } = setup();
    db.exec(`CREATE TABLE owed (m INTEGER REFERENCES messages(id) DEFERRABLE INITIALLY DEFERRED)`);
    insert('a');
    // A row the COMMIT refuses: a foreign key checked only then (a full disk fails at the same place).
    db.prepare(`INSERT INTO owed VALUES (999999)`).run();
    const waiting = committed(db)!;
    const outcome = waiting.then(
      () => 'committed',
      (err: Error) => err.message,
    );
    await nextTurn();
    expect(await outcome).toMatch(/FOREIGN KEY/);
    expect(failures.map((e) => e.message)).toEqual([expect.stringMatching(/FOREIGN KEY/)]);
    expect(db.inTransaction).toBe(false);
    expect(db.prepare('SELECT count(*) FROM messages').pluck().get()).toBe(0);
    insert('b');
    await nextTurn();
    expect(seen()).toEqual(['b']);
    expect(failures).toHaveLength(1);
    expect(group.isOpen).toBe(false);
  });

  it('a group SQLite rolled back before its COMMIT is a failure, not a silent loss', async () => {
    const { db, insert, failures, seen } = setup();
    db.exec(`CREATE TRIGGER gone AFTER INSERT ON messages WHEN NEW.content = 'undo'
             BEGIN SELECT RAISE(ROLLBACK, 'rolled back'); END`);
    insert('a');
    expect(() => insert('undo')).toThrow(/rolled back/);
    expect(db.inTransaction).toBe(false);
    await nextTurn();
    expect(failures.map((e) => e.message)).toEqual([expect.stringMatching(/rolled back by SQLite/)]);
    expect(seen()).toEqual([]);
  });

  it('close() commits what is open and groups nothing after it', () => {
    const { db, group, insert, seen } = setup();
    insert('a');
    closeAndCheck(db, group);
    expect(seen()).toEqual(['a']);
    insert('b');
    expect(db.inTransaction).toBe(false);
    expect(seen()).toEqual(['a', 'b']);
  });
});

function closeAndCheck(db: Db, group: GroupCommit): void {
  group.close();
  expect(db.inTransaction).toBe(false);
  expect(group.isOpen).toBe(false);
}
