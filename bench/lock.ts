/**
 * An operator's open transaction (bench/README.md, `--only=lock`): a whole gated process (the compiled
 * CLI, the process runtime, the example agent, the demo group) while another process holds SQLite's write
 * lock for `holdMs`, as a `sqlite3` session with a transaction left open does. Meanwhile the bench asks
 * /healthz every 50 ms and posts a web chat message every 500 ms. gated must go on answering, and every
 * post must be stored once, in order, and answered once the lock is free.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import Database from 'better-sqlite3';
import { packageFile } from '../core/paths.js';
import { freePort } from './crash.js';

/** What one sitting measured. */
export interface LockResult {
  holdMs: number;
  healthzAsked: number;
  healthzFailed: number;
  healthzP50ms: number;
  healthzP99ms: number;
  healthzMaxMs: number;
  posted: number;
  /** Posts answered 201 with an id, stored once each, ids in the order they were posted. */
  storedInOrder: boolean;
  /** From the lock's release to the last post answered by the agent and the reply delivered. */
  answeredAfterReleaseMs: number;
  /** The slowest post's HTTP answer: it waits for the lock, not for gated. */
  slowestPostMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Another process that takes a database's write lock on `hold()` and keeps it until `release()`. */
export interface LockHolder {
  hold(): Promise<void>;
  release(): Promise<void>;
  /** Ends the process (SIGKILL) if it still runs: the lock goes with it. */
  kill(): void;
}

/**
 * Starts that process: bare node with better-sqlite3, as an operator's `sqlite3` session with a
 * transaction left open (`BEGIN IMMEDIATE`) would hold the lock.
 */
export function lockHolder(dbPath: string): LockHolder {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `const db = new (require('better-sqlite3'))(process.argv[1]);
       process.stdin.once('data', () => { db.exec('BEGIN IMMEDIATE'); console.log('held');
         process.stdin.once('data', () => { db.exec('COMMIT'); console.log('released'); db.close(); }); });`,
      dbPath,
    ],
    { cwd: packageFile(), stdio: ['pipe', 'pipe', 'inherit'] },
  );
  const said = createInterface({ input: child.stdout! });
  const next = () => new Promise<void>((resolve) => said.once('line', () => resolve()));
  return {
    async hold() {
      const held = next();
      child.stdin!.write('hold\n');
      await held;
    },
    async release() {
      const released = next();
      child.stdin!.write('release\n');
      await released;
    },
    kill() {
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted.length === 0
    ? 0
    : sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

export async function lockBench(holdMs: number): Promise<LockResult> {
  const dir = mkdtempSync(join(tmpdir(), 'gated-lock-'));
  const dbPath = join(dir, 'gated.db');
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const gated = spawn(process.execPath, [packageFile('dist', 'gated', 'cli.js'), 'run'], {
    env: {
      ...process.env,
      GATED_DB: dbPath,
      GATED_GROUPS_DIR: join(dir, 'groups'),
      GATED_HTTP_PORT: String(port),
      GATED_RUNTIME: 'process',
      GATED_LOG_LEVEL: 'error',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const holder = lockHolder(dbPath);
  try {
    for (let t = Date.now(); ; await sleep(100)) {
      const ok = await fetch(`${url}/healthz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) break;
      if (Date.now() - t > 30_000) throw new Error('gated did not become healthy within 30 s');
    }
    const cookie = ((await fetch(`${url}/`)).headers.get('set-cookie') ?? '').split(';')[0]!;

    const latencies: number[] = [];
    let failed = 0;
    const posts: Array<Promise<{ id: number | null; ms: number }>> = [];
    await holder.hold();
    const end = Date.now() + holdMs;
    let postAt = 0;
    while (Date.now() < end) {
      if (Date.now() >= postAt) {
        postAt = Date.now() + 500;
        const t = performance.now();
        const body = JSON.stringify({ group: 'demo', content: `posted while locked ${posts.length}` });
        posts.push(
          fetch(`${url}/api/chat/send`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', cookie },
            body,
          }).then(async (r) => ({
            id: r.status === 201 ? ((await r.json()) as { id: number }).id : null,
            ms: performance.now() - t,
          })),
        );
      }
      const t = performance.now();
      const ok = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(10_000) }).then(
        (r) => r.status === 200,
        () => false,
      );
      latencies.push(performance.now() - t);
      if (!ok) failed += 1;
      await sleep(50);
    }
    await holder.release();
    const released = performance.now();
    const stored = await Promise.all(posts);
    const ids = stored.map((p) => p.id);
    const db = new Database(dbPath, { readonly: true });
    try {
      const rows = db
        .prepare(
          `SELECT id, content FROM messages WHERE is_from_me = 0 AND content LIKE 'posted while locked %'`,
        )
        .all() as Array<{ id: number; content: string }>;
      const inOrder =
        ids.every((id, i) => id !== null && (i === 0 || id > ids[i - 1]!)) &&
        rows.length === posts.length &&
        rows.every((r) => r.content === `posted while locked ${ids.indexOf(r.id)}`);
      // Answered: every post's row done and no reply left to deliver.
      const left = db.prepare(
        `SELECT (SELECT count(*) FROM messages WHERE is_from_me = 0 AND content LIKE 'posted while locked %'
                   AND state IS NOT 'done')
              + (SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery = 'pending')`,
      );
      while ((left.pluck().get() as number) > 0) {
        if (performance.now() - released > 60_000) throw new Error('posts not answered within 60 s');
        await sleep(20);
      }
      const sorted = [...latencies].sort((a, b) => a - b);
      return {
        holdMs,
        healthzAsked: latencies.length,
        healthzFailed: failed,
        healthzP50ms: round1(percentile(sorted, 50)),
        healthzP99ms: round1(percentile(sorted, 99)),
        healthzMaxMs: round1(sorted.at(-1) ?? 0),
        posted: posts.length,
        storedInOrder: inOrder,
        answeredAfterReleaseMs: Math.round(performance.now() - released),
        slowestPostMs: Math.round(Math.max(...stored.map((p) => p.ms))),
      };
    } finally {
      db.close();
    }
  } finally {
    holder.kill();
    if (gated.exitCode === null) {
      gated.kill('SIGTERM');
      await new Promise((r) => gated.once('exit', r));
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

function round1(x: number): number {
  return Math.round(x * 10) / 10;
}
