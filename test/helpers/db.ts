import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { openDatabase, type Db } from '../../store/db.js';
import { startGroupCommit, type GroupCommit } from '../../store/group-commit.js';

const cleanups: Array<() => void> = [];

afterEach(() => {
  while (cleanups.length) {
    try {
      cleanups.pop()!();
    } catch {
      // a cleanup that fails must not hide the test's own result
    }
  }
});

/** A temporary folder removed after the test. */
export function tempDir(prefix = 'gated-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * A fresh SQLite file with schema.sql applied, closed and removed after the test. A file (not :memory:)
 * so WAL, a second connection and a "restart" (reopen) behave as in production.
 */
export function freshDb(): { db: Db; path: string; reopen: () => Db } {
  const dir = tempDir();
  const path = join(dir, 'gated.db');
  const opened: Db[] = [];
  const open = () => {
    const db = openDatabase(path);
    opened.push(db);
    return db;
  };
  cleanups.push(() => opened.forEach((d) => d.open && d.close()));
  return { db: open(), path, reopen: open };
}

/** Inserts a messages row of these columns (a row as the poll loop or delivery left it); its id. */
export function insertMessage(db: Db, row: Record<string, unknown>): number {
  const cols = Object.keys(row);
  return Number(
    db
      .prepare(`INSERT INTO messages (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`)
      .run(...Object.values(row)).lastInsertRowid,
  );
}

/**
 * Group commit on `db`, as gated runs it, whose failure throws (a COMMIT that fails, or finds its group
 * rolled back, is a failed test). After the test it is closed before the database is: cleanups run last
 * first, and the test's own `afterEach` (stopping a queue, a delivery) runs before them, so a write still
 * in the turn's open group is committed, not rolled back under it by the connection's close.
 */
export function throwingGroupCommit(db: Db): GroupCommit {
  const group = startGroupCommit(db, {
    onFailed: (err) => {
      throw err;
    },
  });
  cleanups.push(() => group.close());
  return group;
}

/**
 * A second connection to a running gated's file, opened in the test's own thread, as another program
 * (sqlite3, an adapter) would write to it. Its writes must go through `politely`: with group commit gated
 * holds the write lock until the end of its event-loop turn, and a write sleeping in SQLite's busy handler
 * here would block that very turn, so the lock could never be released (a deadlock until the busy timeout).
 */
export function sideConnection(file: string): Db {
  const db = openDatabase(file);
  db.pragma('busy_timeout = 0');
  return db;
}

/**
 * Runs a write of a `sideConnection`: when gated holds the lock, yields to the event loop (so gated's turn
 * can end and commit) and tries again, for up to `ms`; any other error, or the lock still held, is thrown.
 */
export async function politely<T>(write: () => T, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      return write();
    } catch (err) {
      if (!String((err as { code?: unknown }).code).startsWith('SQLITE_BUSY') || Date.now() > end) throw err;
    }
    await new Promise((res) => setImmediate(res));
  }
}
