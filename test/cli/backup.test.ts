import { spawn } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { claimOwner } from '../../store/owner.js';
import { checkDatabaseFile } from '../../store/backup.js';
import { openDatabase } from '../../store/db.js';
import { gatedCli as gated } from '../helpers/cli.js';
import { tempDir } from '../helpers/db.js';
import { exited, until } from '../helpers/process.js';

/**
 * Another process inserting inbound rows as fast as it can, each its own transaction, until killed: the
 * write load of a busy gateway. It prints how many rows it committed every 100 rows.
 */
function writer(path: string) {
  const code = `
    const { openDatabase } = await import(${JSON.stringify(packageFile('store', 'db.ts'))});
    const { insertInbound } = await import(${JSON.stringify(packageFile('store', 'messages.ts'))});
    const db = openDatabase(${JSON.stringify(path)});
    let n = 0;
    const body = 'x'.repeat(400);
    for (;;) {
      insertInbound(db, { chat_jid: 'telegram:1', sender: 'burst', content: body + n });
      if (++n % 100 === 0) { process.stdout.write(n + '\\n'); await new Promise((r) => setImmediate(r)); }
    }`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let committed = 0;
  child.stdout.on('data', (d: Buffer) => {
    const last = String(d).trim().split('\n').at(-1);
    if (last) committed = Number(last);
  });
  return { child, committed: () => committed };
}

describe('gated backup and restore', { timeout: 60_000 }, () => {
  it('a backup taken during a burst restores whole: integrity ok, every row committed before it began', async () => {
    const dir = tempDir();
    const path = join(dir, 'gated.db');
    const db = openDatabase(path);
    // Some bulk first, so the copy takes long enough for the writer to commit while it runs.
    const fill = db.prepare(
      `INSERT INTO messages (chat_jid, sender, content) VALUES ('telegram:2', 'old', ?)`,
    );
    db.transaction(() => {
      for (let i = 0; i < 20_000; i++) fill.run('y'.repeat(400) + i);
    })();
    const w = writer(path);
    try {
      await until(() => w.committed() >= 500, 20_000, 'the writer committing rows');
      const before = db.prepare('SELECT max(id) FROM messages').pluck().get() as number;
      const atStart = w.committed();
      const file = join(dir, 'backup.db');
      const r = await gated(path, 'backup', file);
      expect(r, r.err).toMatchObject({ code: 0 });
      expect(r.out).toMatch(/backed up .* \(\d+ pages, integrity ok\)/);
      // The burst went on meanwhile (else this test would prove nothing about a live database).
      await until(() => w.committed() > atStart + 200, 20_000, 'the writer going on');
      // The backup is one file: no partial copy, and no -wal or -shm of it beside.
      expect(readdirSync(dir).filter((f) => f.startsWith('backup.db'))).toEqual(['backup.db']);

      // A gated owns the live database: restore refuses and changes nothing.
      const owner = claimOwner(db);
      const refused = await gated(path, 'restore', file);
      owner.release();
      expect(refused.code).toBe(2);
      expect(refused.err).toMatch(/a gated \(pid \d+ on .*\) runs on .*; stop it before restoring/);

      w.child.kill('SIGKILL');
      await exited(w.child);
      const liveRows = db.prepare('SELECT count(*) FROM messages').pluck().get() as number;
      db.close();
      const ok = await gated(path, 'restore', file);
      expect(ok, ok.err).toMatchObject({ code: 0 });
      expect(ok.out).toMatch(/the replaced database is kept at .*gated\.db\.replaced-/);

      expect(checkDatabaseFile(path)).toMatchObject({ ok: true, problems: [] });
      const restored = openDatabase(path);
      const ids = restored.prepare('SELECT id FROM messages WHERE id <= ? ORDER BY id').pluck().all(before);
      expect(ids).toHaveLength(before);
      expect(ids.at(-1)).toBe(before);
      const total = restored.prepare('SELECT count(*) FROM messages').pluck().get() as number;
      // A snapshot: more than what was committed when it began, less than what the writer went on to commit.
      expect(total).toBeGreaterThanOrEqual(before);
      expect(total).toBeLessThan(liveRows);
      restored.close();
      const aside = readdirSync(dir).find((f) => f.startsWith('gated.db.replaced-'))!;
      const old = openDatabase(join(dir, aside));
      expect(old.prepare('SELECT count(*) FROM messages').pluck().get()).toBe(liveRows);
      old.close();
    } finally {
      if (w.child.exitCode === null) w.child.kill('SIGKILL');
    }
  });

  it('a file that is not a sound database, a newer schema or an existing target are refused', async () => {
    const dir = tempDir();
    const path = join(dir, 'gated.db');
    openDatabase(path).close();
    const junk = join(dir, 'junk.db');
    writeFileSync(junk, 'SQLite format 3\0' + 'garbage '.repeat(600));
    const bad = await gated(path, 'restore', junk);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/junk\.db is not a sound database, nothing restored/);

    const newer = join(dir, 'newer.db');
    const n = openDatabase(newer);
    n.pragma('user_version = 999');
    n.close();
    const later = await gated(path, 'restore', newer);
    expect(later.err).toMatch(/schema version 999, newer than this gated/);
    expect(readdirSync(dir).filter((f) => f.includes('replaced'))).toEqual([]);

    const exists = await gated(path, 'backup', junk);
    expect(exists.code).toBe(2);
    expect(exists.err).toMatch(/junk\.db exists; choose a new file name/);
  });
});
