/**
 * Another process holds SQLite's write lock for 10 s (BEGIN IMMEDIATE, as `sqlite3` or an external adapter
 * with a long transaction would) while `gated run` is in the middle of its work: polling, starting and
 * settling runs, storing replies and recording deliveries. gated must wait it out on every connection it
 * has and lose nothing: every message, those written before and those written by the lock holder, is
 * answered exactly once and every reply is delivered.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { DEFAULT_BUSY_TIMEOUT_MS, openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, stderrOf, until } from '../helpers/process.js';

/** How long the other process holds the lock: longer than SQLite's and better-sqlite3's own defaults. */
const HOLD_MS = 10_000;

/** Source files of gated itself (not tests, not benchmarks), relative to the package root. */
function sources(dir = packageFile()): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    if (['node_modules', 'test', 'bench', 'dist', '.git'].includes(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sources(path));
    else if (/\.(ts|mjs|js)$/.test(name)) out.push(relative(packageFile(), path));
  }
  return out;
}

describe('an external writer holding the write lock', () => {
  it('every connection gated opens goes through openDatabase, which sets the busy timeout', () => {
    // The one constructor call; everything else (run, chat, the CLI's commands) opens through it. The
    // checkpoint worker's connection is the other: a thread cannot share this one, it never writes rows,
    // and it waits for locks only briefly by design (its checkpoint is tried again at its next look).
    const opening = sources().filter((f) => /new Database\(/.test(readFileSync(packageFile(f), 'utf8')));
    expect(opening).toEqual(['store/checkpoint-worker.mjs', 'store/db.ts']);
    expect(DEFAULT_BUSY_TIMEOUT_MS).toBeGreaterThanOrEqual(3 * HOLD_MS);
    const db = openDatabase(join(tempDir(), 'gated.db'));
    expect(db.pragma('busy_timeout', { simple: true })).toBe(DEFAULT_BUSY_TIMEOUT_MS);
    db.close();
  });

  it('gated waits for a 10 s lock and loses nothing: every message answered once, every reply delivered', async () => {
    const dir = tempDir();
    const env = gatedEnv(dir, {
      GATED_IDLE_TIMEOUT_MS: '300',
      GATED_MAX_CONCURRENT: '2',
      // Slow enough that runs are in flight, and replies due, while the lock is held.
      GATED_AGENT_CMD: 'sleep 0.3; exec node "$GATED_HOME/agents/example/agent.mjs"',
    });
    const dbPath = env.GATED_DB;
    const groups = ['g1', 'g2', 'g3', 'g4'];
    const seed = openDatabase(dbPath);
    for (const g of groups) addGroup(seed, env.GATED_GROUPS_DIR, g);
    const sent: string[] = [];
    const write = (db: Database.Database, round: string) => {
      for (const g of groups) {
        for (let i = 0; i < 4; i++) {
          const text = `m-${round}-${g}-${i}`;
          insertInbound(db, { chat_jid: `web:${g}`, sender: 'u', content: text });
          sent.push(text);
        }
      }
    };
    write(seed, 'before');
    seed.close();

    const child = gatedRun(env);
    const holder = new Database(dbPath, { timeout: 60_000 });
    const count = (sql: string) => holder.prepare(sql).pluck().get() as number;
    await until(() => count(`SELECT count(*) FROM session_log WHERE result IS NULL`) >= 1, 20_000, 'a run');

    // The other process takes the write lock and writes rows of its own inside it.
    holder.exec('BEGIN IMMEDIATE');
    write(holder, 'locked');
    const lockedAt = Date.now();
    await new Promise((r) => setTimeout(r, HOLD_MS));
    holder.exec('COMMIT');
    expect(Date.now() - lockedAt).toBeGreaterThanOrEqual(HOLD_MS);
    expect(child.exitCode).toBeNull();

    await until(
      () => count(`SELECT count(*) FROM messages WHERE is_from_me = 0 AND state = 'done'`) === sent.length,
      60_000,
      'every message answered',
    );
    await until(
      () => count(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery = 'pending'`) === 0,
      20_000,
      'every reply delivered',
    );
    child.kill('SIGTERM');
    expect(await exited(child)).toBe(0);

    const echoed = (
      holder.prepare(`SELECT content FROM messages WHERE is_from_me = 1`).pluck().all() as string[]
    )
      .join('\n')
      .split('\n')
      .filter((l) => l.startsWith('echo: '));
    for (const text of sent)
      expect(
        echoed.filter((l) => l === `echo: ${text}`),
        text,
      ).toHaveLength(1);
    expect(count(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery <> 'sent'`)).toBe(0);
    expect(stderrOf(child)).not.toMatch(/database is locked|SQLITE_BUSY/);
    holder.close();
  }, 120_000);
});
