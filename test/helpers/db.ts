import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach } from 'vitest';
import { openDatabase, type Db } from '../../store/db.js';

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
