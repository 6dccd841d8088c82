import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { politely, sideConnection, tempDir } from '../helpers/db.js';
import { startTestGated } from '../helpers/gated.js';
import { exited, spawnGated, until } from '../helpers/process.js';

let blocker: Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (blocker ? blocker.close(() => r()) : r()));
  blocker = undefined;
});

function stderrOf(child: ReturnType<typeof spawnGated>): () => string {
  let text = '';
  child.stderr!.on('data', (b: Buffer) => (text += b.toString()));
  return () => text;
}

describe('gated run refuses to run half-alive', () => {
  it('exits 1 with one line when the HTTP port is taken', async () => {
    blocker = createServer();
    await new Promise<void>((r) => blocker!.listen(0, '127.0.0.1', () => r()));
    const port = (blocker.address() as { port: number }).port;
    const dir = tempDir();
    const child = spawnGated(['run'], {
      GATED_DB: join(dir, 'gated.db'),
      GATED_GROUPS_DIR: join(dir, 'groups'),
      GATED_HTTP_PORT: String(port),
      GATED_LOG_LEVEL: 'silent',
    });
    const err = stderrOf(child);
    expect(await exited(child)).toBe(1);
    const lines = err().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`cannot listen on 127.0.0.1:${port}`));
  }, 30_000);

  it('exits 1 naming the file when the database is corrupt', async () => {
    const dir = tempDir();
    const file = join(dir, 'gated.db');
    writeFileSync(file, Buffer.alloc(8192, 0x5a));
    const child = spawnGated(['run'], {
      GATED_DB: file,
      GATED_GROUPS_DIR: join(dir, 'groups'),
      GATED_HTTP_PORT: '0',
      GATED_LOG_LEVEL: 'silent',
    });
    const err = stderrOf(child);
    expect(await exited(child)).toBe(1);
    expect(err().trim().split('\n')).toHaveLength(1);
    expect(err()).toContain(file);
  }, 30_000);
});

describe('/healthz tells the truth', () => {
  async function start() {
    const g = await startTestGated({ channels: [], demo: true, env: { GATED_POLL_MS: '50' } });
    const health = async () => {
      const res = await fetch(`${g.url}/healthz`);
      return { status: res.status, body: (await res.json()) as { reason?: string } };
    };
    return { g, health, file: g.config.db };
  }

  it('503 when rows are running without a live run (a wedged queue), 200 again once they end', async () => {
    const { g, health, file } = await start();
    expect((await health()).status).toBe(200);
    // Another connection, as sqlite3 or a crashed writer would leave it.
    const other = sideConnection(file);
    const insert = other.prepare(
      `INSERT INTO messages (chat_jid, content, state, run_id, is_from_me) VALUES ('x:1', 'hi', 'running', 424242, 1)`,
    );
    const id = (await politely(() => insert.run())).lastInsertRowid;
    const bad = await health();
    expect(bad.status).toBe(503);
    expect(bad.body.reason).toMatch(/queue: rows running without a live run \(run 424242\)/);
    const done = other.prepare(`UPDATE messages SET state = 'done' WHERE id = ?`);
    await politely(() => done.run(id));
    other.close();
    expect((await health()).status).toBe(200);
    expect(g.gateway.loop.health().failures).toBe(0);
  });

  it('503 when the poll loop has not completed a tick in 3 poll intervals (at least 2 s)', async () => {
    const { g, health } = await start();
    expect((await health()).status).toBe(200);
    g.gateway.loop.stop();
    const stale = await until(async () => {
      const h = await health();
      return h.status === 503 ? h : undefined;
    });
    expect(stale.body.reason).toMatch(/loop: no completed poll tick for \d+ ms/);
  });
});
