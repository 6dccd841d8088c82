/**
 * The low-severity holes of issue 22, each against the real parts: `gated run` and the CLI as child
 * processes on a real SQLite file, the whole gateway with the process runtime. Each of these failed on the
 * tree before its fix.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { startGated, type Gated } from '../../gated/app.js';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { e2eConfig } from '../channels/support.js';
import { tempDir } from '../helpers/db.js';
import { exited, GATED_BIN, gatedEnv, gatedRun, gatedUp, stderrOf, until } from '../helpers/process.js';

let gated: Gated | undefined;
afterEach(async () => {
  await gated?.close(2000);
  gated = undefined;
}, 30_000);

/**
 * Runs the real CLI in a child process. `readOnly`: as a user who may only read the database (nobody when
 * the tests run as root, who may write anything; else the folder and file are made read-only).
 */
function cli(args: string[], env: Record<string, string>, readOnly = false) {
  const argv = [process.execPath, GATED_BIN, ...args];
  const asNobody = readOnly && process.getuid?.() === 0;
  const [bin, ...rest] = asNobody
    ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', ...argv]
    : argv;
  const r = spawnSync(bin!, rest, {
    encoding: 'utf8',
    env: { ...process.env, ...env, ...(asNobody ? { HOME: '/tmp' } : {}) },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe('the database', () => {
  it('a row breaking a CHECK constraint does not stop the start: it is named, and fails alone', async () => {
    const dir = tempDir();
    const env = gatedEnv(dir, { GATED_LOG_LEVEL: 'warn' });
    const db = openDatabase(env.GATED_DB);
    addGroup(db, env.GATED_GROUPS_DIR, 'demo');
    // As a program that turned the checks off (or an older schema) can write it.
    db.pragma('ignore_check_constraints = ON');
    const bad = Number(
      db
        .prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('web:demo', 'u', ?)`)
        .run(Buffer.from('blob')).lastInsertRowid,
    );
    db.close();
    const child = gatedRun(env);
    // The log (JSON lines) goes to stdout; stderr has the one line saying where the web chat is.
    let log = '';
    child.stdout!.on('data', (d) => (log += String(d)));
    await gatedUp(child);
    expect(log).toContain(`messages row ${bad} breaks CHECK (typeof(chat_jid) = 'text'`);
    expect(log + stderrOf(child)).not.toMatch(/corrupt/);
    const reader = openDatabase(env.GATED_DB);
    try {
      const row = await until(
        () =>
          reader.prepare(`SELECT state, error FROM messages WHERE id = ? AND state IS NOT NULL`).get(bad) as
            { state: string; error: string } | undefined,
        15_000,
        'the bad row handled',
      );
      expect(row).toEqual({ state: 'failed', error: 'column content holds a 4-byte blob, not text' });
    } finally {
      reader.close();
    }
    child.kill('SIGTERM');
    expect(await exited(child)).toBe(0);
  }, 60_000);

  it('`status`, `routes list` and `audit` work on a database this user may only read', () => {
    const dir = tempDir();
    const env = gatedEnv(dir);
    const db = openDatabase(env.GATED_DB);
    addGroup(db, env.GATED_GROUPS_DIR, 'demo');
    db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=web', 'demo')`).run();
    db.close();
    // gated stopped cleanly: no -wal or -shm beside the file, and this user may not create them.
    expect(readdirSync(dir).filter((f) => f.startsWith('gated.db'))).toEqual(['gated.db']);
    chmodSync(env.GATED_DB, 0o444);
    chmodSync(dir, 0o555);
    try {
      const status = cli(['status'], env, true);
      expect(status).toMatchObject({ code: 0, err: '' });
      expect(status.out).toMatch(/^groups \(1\): demo$/m);
      const routes = cli(['routes', 'list'], env, true);
      expect(routes).toMatchObject({ code: 0, err: '' });
      expect(routes.out).toMatch(/platform=web\s+demo\s+ok/);
      const audit = cli(['audit'], env, true);
      expect(audit).toMatchObject({ code: 0, err: '' });
      expect(audit.out).toMatch(/routes\.insert/);
      // Nothing was written: still no -wal or -shm.
      expect(readdirSync(dir).filter((f) => f.startsWith('gated.db'))).toEqual(['gated.db']);
    } finally {
      chmodSync(dir, 0o755);
      chmodSync(env.GATED_DB, 0o644);
    }
  }, 60_000);
});

describe('the command line', () => {
  it('a 300-character group name exits 2 with one line naming the limit; nothing is created', () => {
    const dir = tempDir();
    const env = gatedEnv(dir);
    const name = 'a'.repeat(300);
    const r = cli(['groups', 'add', name], env);
    expect(r.code).toBe(2);
    expect(r.err.trim().split('\n')).toHaveLength(1);
    expect(r.err).toMatch(/bad group folder 'a{40}…': 300 characters; a group folder has at most 200/);
    const segment = cli(['groups', 'add', `ok/${'b'.repeat(65)}`], env);
    expect(segment.code).toBe(2);
    expect(segment.err).toMatch(/a segment of 65 characters; each segment has at most 64/);
    expect(existsSync(join(env.GATED_GROUPS_DIR, name))).toBe(false);
  }, 60_000);
});

describe('metrics', () => {
  it('gated_lanes_active is the number of lanes with a live agent at every scrape', async () => {
    const config = e2eConfig(
      tempDir('gated-lanes-'),
      { GATED_IDLE_TIMEOUT_MS: '60000', GATED_MAX_CONCURRENT: '5' },
      {
        groups: [
          ['a', 'A'],
          ['b', 'B'],
          ['c', 'C'],
        ],
        routes: [],
      },
    );
    gated = await startGated({ config, log: silentLogger(), http: false });
    const g = gated;
    const gauge = async () => {
      const m = /^gated_lanes_active (\d+)$/m.exec(await g.metrics.text());
      return Number(m?.[1]);
    };
    const answered = (chat: string) =>
      g.db
        .prepare(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND chat_jid = ?`)
        .pluck()
        .get(chat) as number;
    expect(await gauge()).toBe(0);
    const seen: number[] = [];
    for (const group of ['a', 'b', 'c']) {
      g.gateway.sink({ chat_jid: `web:${group}`, sender: 'u', content: 'hello' });
      await until(() => answered(`web:${group}`) > 0, 15_000, `an answer in web:${group}`);
      seen.push(await gauge());
    }
    // Each agent answered and waits for a follow-up: its lane is live.
    for (const group of ['a', 'b', 'c']) {
      await g.queue.stop({ group, topic: '' });
      seen.push(await gauge());
    }
    expect(seen).toEqual([1, 2, 3, 2, 1, 0]);
  }, 60_000);
});
