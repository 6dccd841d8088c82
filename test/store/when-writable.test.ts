import { setTimeout as realSleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  committed,
  LOCK_RETRY_MS,
  OrderedWrites,
  startGroupCommit,
  whenWritable,
  writeEvery,
} from '../../store/group-commit.js';
import { freshDb } from '../helpers/db.js';
import { until } from '../helpers/process.js';

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

/**
 * Lets `n` turns of the event loop pass (timers of 5 ms, however long the machine takes to run them). Counted,
 * not timed: a write blocked in SQLite's busy handler would hold the loop until it gave up, and be settled.
 */
async function loopTurns(n: number): Promise<void> {
  for (let i = 0; i < n; i += 1) await new Promise((r) => setTimeout(r, 5));
}

/**
 * Lets `n` turns of the lock-retry timer pass (real timers): a write waiting for the lock tries again in
 * each. What a test then asserts must hold however long they took.
 */
async function retryTurns(n: number): Promise<void> {
  for (let i = 0; i < n; i += 1) await realSleep(LOCK_RETRY_MS);
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
    // Turns of the loop and of the writes' lock retries pass while the lock is held; neither write is made.
    await loopTurns(10);
    await retryTurns(3);
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
    await loopTurns(6);
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
    // The periods are the test's to give (fake setInterval); the waiting write's retries keep their real
    // timers (store/group-commit.ts takes them from node:timers), so the order below is proved by counting
    // periods, not by how long the machine takes to run them.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
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
      await vi.advanceTimersByTimeAsync(200); // ten periods: the first write waits, the nine others are skipped
      await retryTurns(5);
      expect(made).toBe(0);
      other.exec('COMMIT');
      await until(() => made > 0, 10_000, 'the waiting write');
      // Ten piled-up writes would all be made within a few retries, with no period passing: only the one
      // that waited is, however long this takes.
      await retryTurns(10);
      expect(made).toBe(1);
      // The lock is free: each later period makes its write at once, one each.
      await vi.advanceTimersByTimeAsync(20);
      expect(made).toBe(2);
      await vi.advanceTimersByTimeAsync(20);
      expect(made).toBe(3);
      expect(errors).toEqual([]);
    } finally {
      clearInterval(timer);
      vi.useRealTimers();
    }
  });
});
