import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { createSignals } from '../../core/signals.js';
import { watchCommits } from '../../gateway/watch.js';
import { startCheckpointer, type CheckpointPass } from '../../store/checkpoint.js';
import { openDatabase } from '../../store/db.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';

const size = (path: string) => (existsSync(path) ? statSync(path).size : 0);

/** Writes about `kib` KiB of rows from `db` in one transaction. */
function fill(db: ReturnType<typeof openDatabase>, kib: number): void {
  const insert = db.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('web:x', 'u', ?)`);
  const text = 'x'.repeat(1000);
  db.transaction(() => {
    for (let i = 0; i < kib; i++) insert.run(text);
  })();
}

describe('the checkpoint worker', () => {
  it("copies the WAL into the database file on its own thread: the main connection's autocheckpoint is off", async () => {
    const { db, path } = freshDb();
    const passes: CheckpointPass[] = [];
    const cp = startCheckpointer(db, {
      log: silentLogger(),
      metrics: { walCheckpoint: (p) => passes.push(p) },
    });
    try {
      expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
      const before = size(path);
      // 8 MB: eight times SQLite's autocheckpoint threshold, none of it copied by this connection.
      for (let i = 0; i < 8; i++) fill(db, 1000);
      // The worker's report of a pass arrives after its copy: both are waited for.
      await until(
        () => size(path) - before > 7 * 2 ** 20 && cp.stats.passes > 0,
        10_000,
        'the pages copied into the file',
      );
      expect(passes.at(-1)!.passive.busy).toBe(0);
      expect(cp.stats.truncates).toBe(0);
    } finally {
      await cp.close();
    }
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
  }, 20_000);

  it('waits for 1,000 frames as SQLite would, or for the WAL to rest: not a checkpoint per commit', async () => {
    const { db } = freshDb();
    const cp = startCheckpointer(db, { log: silentLogger(), policy: { idleMs: 60_000 } });
    try {
      for (let i = 0; i < 10; i++) fill(db, 20);
      await new Promise((r) => setTimeout(r, 500));
      expect(cp.stats.passes).toBe(0);
      fill(db, 5000);
      await until(() => cp.stats.passes > 0, 10_000, 'a pass past 1,000 frames');
    } finally {
      await cp.close();
    }
  }, 20_000);

  it('bounds the WAL: past its limit the file is checkpointed to its end and truncated', async () => {
    const { db, path } = freshDb();
    const cp = startCheckpointer(db, { log: silentLogger(), policy: { truncateBytes: 2 ** 20 } });
    try {
      fill(db, 3000);
      expect(size(`${path}-wal`)).toBeGreaterThan(2 ** 20);
      await until(() => cp.stats.truncates > 0, 10_000, 'a TRUNCATE');
      expect(size(`${path}-wal`)).toBe(0);
      expect(db.prepare(`SELECT count(*) FROM messages`).pluck().get()).toBe(3000);
    } finally {
      await cp.close();
    }
  }, 20_000);

  it('a PASSIVE checkpoint does not wake the commit watcher; shutdown folds the WAL in and removes it', async () => {
    const path = join(tempDir(), 'gated.db');
    const db = openDatabase(path);
    // The watcher's own connection: the commits of `db` are another connection's to it.
    const watcherDb = openDatabase(path);
    let wakes = 0;
    const signals = createSignals();
    signals.inbound.on(() => (wakes += 1));
    const watch = watchCommits(watcherDb, path, signals, silentLogger(), 1);
    const cp = startCheckpointer(db, { log: silentLogger() });
    try {
      fill(db, 100);
      await until(() => wakes > 0 && cp.stats.passes > 0, 10_000, 'a wake and a pass');
      await new Promise((r) => setTimeout(r, 100));
      const seen = wakes;
      fill(db, 100);
      await until(() => cp.stats.passes > 1, 10_000, 'a second pass');
      // One commit, one wake (coalesced); the pass after it read the WAL and woke nobody.
      await new Promise((r) => setTimeout(r, 300));
      expect(wakes).toBe(seen + 1);
    } finally {
      watch.close();
      watcherDb.close();
      await cp.close();
      db.close();
    }
    expect(existsSync(`${path}-wal`)).toBe(false);
    const again = openDatabase(path);
    expect(again.prepare(`SELECT count(*) FROM messages`).pluck().get()).toBe(200);
    again.close();
  }, 20_000);

  it("the commit watcher wakes for another connection's commit, never for its own connection's", async () => {
    const path = join(tempDir(), 'gated.db');
    const db = openDatabase(path);
    const other = openDatabase(path);
    let wakes = 0;
    const signals = createSignals();
    signals.inbound.on(() => (wakes += 1));
    const watch = watchCommits(db, path, signals, silentLogger(), 1);
    try {
      fill(db, 10);
      // Its own commit wrote the WAL file too, and the watcher looked: no wake (a slow watcher would only
      // make this pass without proving it; the wake below shows the watcher works).
      await new Promise((r) => setTimeout(r, 150));
      expect(wakes).toBe(0);
      fill(other, 1);
      await until(() => wakes > 0, 10_000, "the other connection's wake");
      expect(wakes).toBe(1);
      fill(db, 10);
      await new Promise((r) => setTimeout(r, 150));
      expect(wakes).toBe(1);
    } finally {
      watch.close();
      other.close();
      db.close();
    }
  });

  it('a database in memory has no WAL: nothing starts', async () => {
    const db = openDatabase(':memory:');
    const cp = startCheckpointer(db, { log: silentLogger() });
    expect(db.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
    await cp.close();
    db.close();
  });
});
