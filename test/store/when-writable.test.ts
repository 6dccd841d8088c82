import { setImmediate as nextTurn } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import {
  committed,
  OrderedWrites,
  startGroupCommit,
  whenWritable,
  writeEvery,
} from '../../store/group-commit.js';
import { freshDb } from '../helpers/db.js';

/** A database with group commit on, and a second connection: another process that takes the write lock. */
function setup() {
  const { db, path } = freshDb();
  const failures: Error[] = [];
  startGroupCommit(db, { onFailed: (err) => failures.push(err) });
  const other = new Database(path);
  others.push(other);
  const insert = (content: string) =>
    Number(
      db.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('web:x', 'u', ?)`).run(content)
        .lastInsertRowid,
    );
  const stored = () => other.prepare('SELECT content FROM messages ORDER BY id').pluck().all() as string[];
  return { db, other, insert, stored, failures };
}

const others: Database.Database[] = [];
afterEach(() => {
  for (const o of others.splice(0)) if (o.open) o.close();
});

/** Lets the event loop run for about `ms`: a loop blocked in SQLite's busy handler would not get here. */
async function loopRuns(ms: number): Promise<number> {
  let turns = 0;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    await new Promise((r) => setTimeout(r, 5));
    turns += 1;
  }
  return turns;
}

describe('writes that wait for another process lock off the event loop', () => {
  it('run at once (synchronously) when the lock is free', async () => {
    const { db, insert, stored } = setup();
    let id = 0;
    const p = whenWritable(db, () => (id = insert('now')));
    expect(id).toBeGreaterThan(0);
    expect(await p).toBe(id);
    await committed(db);
    expect(stored()).toEqual(['now']);
  });

  it('wait while it is held, with the event loop free, and keep the order they were asked in', async () => {
    const { db, other, insert, stored, failures } = setup();
    other.exec('BEGIN IMMEDIATE');
    const writes = new OrderedWrites(db);
    let settled = 0;
    const a = writes.run(() => insert('a')).finally(() => (settled += 1));
    const b = writes.run(() => insert('b')).finally(() => (settled += 1));
    expect(await loopRuns(150)).toBeGreaterThan(5);
    expect(settled).toBe(0);
    other.exec('COMMIT');
    // The lock is free at this very moment, yet c goes after a and b, which asked first.
    const c = writes.run(() => insert('c'));
    const ids = await Promise.all([a, b, c]);
    expect(ids[0]).toBeLessThan(ids[1]);
    expect(ids[1]).toBeLessThan(ids[2]);
    await committed(db);
    expect(stored()).toEqual(['a', 'b', 'c']);
    expect(failures).toEqual([]);
  });

  it('a write that throws rejects alone; the ones after it are made', async () => {
    const { db, other, insert, stored } = setup();
    other.exec('BEGIN IMMEDIATE');
    const writes = new OrderedWrites(db);
    const bad = writes.run(() => {
      throw new Error('not this one');
    });
    const good = writes.run(() => insert('after'));
    await loopRuns(30);
    other.exec('COMMIT');
    await expect(bad).rejects.toThrow('not this one');
    expect(await good).toBeGreaterThan(0);
    await committed(db);
    expect(stored()).toEqual(['after']);
  });

  it('a periodic write skips its periods while one waits, instead of piling them up', async () => {
    const { db, other, insert } = setup();
    const errors: unknown[] = [];
    let made = 0;
    other.exec('BEGIN IMMEDIATE');
    const timer = writeEvery(
      db,
      20,
      () => {
        insert('beat');
        made += 1;
      },
      (err) => errors.push(err),
    );
    try {
      await loopRuns(200); // about ten periods
      expect(made).toBe(0);
      other.exec('COMMIT');
      while (made === 0) await nextTurn();
      // Ten waiting writes would all be made now; one waited, and the next comes a period later.
      await loopRuns(8);
      expect(made).toBe(1);
      while (made < 3) await nextTurn();
      expect(errors).toEqual([]);
    } finally {
      clearInterval(timer);
    }
  });
});
