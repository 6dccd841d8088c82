import { createServer } from 'node:net';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { startHttpServer } from '../../http/app.js';
import { joinGroup, startGroupCommit } from '../../store/group-commit.js';
import { startWebServer, type WebServer } from './harness.js';
import { SseClient } from './sse-client.js';

describe('startHttpServer', () => {
  it('binds 127.0.0.1 on an ephemeral port and reports the real URL', async () => {
    const app = new Hono().get('/x', (c) => c.text('ok'));
    const srv = await startHttpServer(app, { host: '127.0.0.1', port: 0 });
    try {
      expect(srv.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(srv.url.endsWith(':0')).toBe(false);
      expect(await (await fetch(`${srv.url}/x`)).text()).toBe('ok');
    } finally {
      await srv.close();
    }
    await srv.close(); // idempotent
    await expect(fetch(`${srv.url}/x`)).rejects.toThrow();
  });

  it('compiles the app router when the app is served, before the first request', async () => {
    const srv = await startHttpServer(undefined, { host: '127.0.0.1', port: 0 });
    try {
      expect((await fetch(`${srv.url}/x`)).status).toBe(503);
      const app = new Hono().get('/x', (c) => c.text('ok'));
      expect(app.router.name).toBe('SmartRouter');
      srv.serve(app);
      // Hono names the router it chose once it has compiled the routes.
      expect(app.router.name).toMatch(/^SmartRouter \+ \w+Router$/);
      expect(await (await fetch(`${srv.url}/x`)).text()).toBe('ok');
    } finally {
      await srv.close();
    }
  });

  it('rejects with the address when the port is taken', async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    const port = (blocker.address() as { port: number }).port;
    try {
      await expect(startHttpServer(new Hono(), { host: '127.0.0.1', port })).rejects.toThrow(
        new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`),
      );
    } finally {
      await new Promise((r) => blocker.close(r));
    }
  });

  it('closes promptly with SSE streams open', async () => {
    const s = await startWebServer();
    const a = await SseClient.open(`${s.url}/api/chat/stream?group=demo`);
    const b = await SseClient.open(`${s.url}/api/chat/stream?group=demo&topic=z`);
    await a.waitFor('ready', 1);
    await b.waitFor('ready', 1);
    const t0 = Date.now();
    await s.close();
    await a.waitEnd();
    await b.waitEnd();
    expect(Date.now() - t0).toBeLessThan(2000);
  });
});

describe('/healthz', () => {
  it('answers 200 when the database and the runtime answer', async () => {
    let pings = 0;
    const s = await startWebServer({ pingRuntime: async () => void pings++ });
    const r = await fetch(`${s.url}/healthz`);
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ status: 'ok', db: 'ok', runtime: 'ok' });
    expect(pings).toBe(1);
  });

  it('answers 503 with the reason when the runtime does not answer', async () => {
    const s = await startWebServer({
      pingRuntime: async () => {
        throw new Error('connect ENOENT /run/docker.sock');
      },
    });
    const r = await fetch(`${s.url}/healthz`);
    expect(r.status).toBe(503);
    expect(await r.json()).toEqual({
      status: 'unavailable',
      reason: 'runtime: connect ENOENT /run/docker.sock',
      db: 'ok',
      runtime: 'connect ENOENT /run/docker.sock',
    });
  });

  it("answers without waiting for the COMMIT of its turn's writes (a failing one here)", async () => {
    const failures: Error[] = [];
    const opened: { db?: WebServer['db'] } = {};
    const s = await startWebServer({
      pingRuntime: async () => {
        // Other work of this turn opened the group and wrote a row its COMMIT refuses (a foreign key
        // checked only then): an answer that waited for that COMMIT would be an error.
        joinGroup(opened.db!);
        opened.db!.prepare('INSERT INTO owed VALUES (999999)').run();
      },
    });
    opened.db = s.db;
    s.db.exec('CREATE TABLE owed (m INTEGER REFERENCES messages(id) DEFERRABLE INITIALLY DEFERRED)');
    startGroupCommit(s.db, { onFailed: (err) => failures.push(err) });
    const r = await fetch(`${s.url}/healthz`);
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ status: 'ok', db: 'ok', runtime: 'ok' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(failures.map((e) => e.message)).toEqual([expect.stringMatching(/FOREIGN KEY/)]);
  });

  it('answers 503 when the database is gone', async () => {
    const s = await startWebServer();
    s.db.close();
    const r = await fetch(`${s.url}/healthz`);
    expect(r.status).toBe(503);
    const body = (await r.json()) as { reason: string };
    expect(body.reason).toMatch(/^db: .*not open/);
  });
});
