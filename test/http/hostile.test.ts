import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { getJson, startWebServer } from './harness.js';
import { SseClient } from './sse-client.js';

/** A raw request with any Host and Origin (fetch does not let a test forge Host). */
function raw(
  url: string,
  opts: { method?: string; host?: string; origin?: string; body?: string },
): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        hostname: u.hostname,
        port: u.port,
        path: u.pathname + u.search,
        method: opts.method ?? 'GET',
        headers: {
          host: opts.host ?? u.host,
          ...(opts.origin ? { origin: opts.origin } : {}),
          ...(opts.body ? { 'content-type': 'application/json' } : {}),
        },
      },
      (res) => {
        let body = '';
        res.on('data', (b: Buffer) => (body += b.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** Stores `n` rows of the web chat of `demo` in one transaction. */
function fill(db: Awaited<ReturnType<typeof startWebServer>>['db'], n: number): void {
  const ins = db.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES ('web:demo', 'u', ?)`);
  db.transaction(() => {
    for (let i = 0; i < n; i++) ins.run(`line ${i}`);
  })();
}

describe('HTTP refuses what a hostile page can send', () => {
  it('answers 421 to a foreign Host (DNS rebinding) and serves localhost and 127.0.0.1', async () => {
    const s = await startWebServer();
    const port = new URL(s.url).port;
    expect((await raw(`${s.url}/api/chat/groups`, { host: `attacker.example:${port}` })).status).toBe(421);
    expect((await raw(`${s.url}/api/chat/groups`, { host: `localhost:${port}` })).status).toBe(200);
    expect((await raw(`${s.url}/api/chat/groups`, { host: `127.0.0.1:${port}` })).status).toBe(200);
  });

  it('refuses a state-changing request from another Origin, accepts the same origin and no origin', async () => {
    const s = await startWebServer();
    const body = JSON.stringify({ group: 'demo', content: 'hi', client: 'c1' });
    const send = `${s.url}/api/chat/send`;
    const foreign = await raw(send, { method: 'POST', origin: 'https://attacker.example', body });
    expect(foreign.status).toBe(403);
    expect(s.woken).toEqual([]);
    expect((await raw(send, { method: 'POST', origin: s.url, body })).status).toBe(201);
    expect((await raw(send, { method: 'POST', body: body.replace('hi', 'hi again') })).status).toBe(201);
    expect(s.woken).toHaveLength(2);
  });

  it('pages history and the SSE replay at 500 rows a response; the client pages on from the last id', async () => {
    const s = await startWebServer();
    fill(s.db, 1200);
    const h = await getJson(`${s.url}/api/chat/history?group=demo&limit=100000`);
    expect((h.body.lines as unknown[]).length).toBe(500);

    const seen: number[] = [];
    let after = 0;
    for (const expected of [500, 500, 200]) {
      const c = await SseClient.open(`${s.url}/api/chat/stream?group=demo&after=${after}`);
      const msgs = await c.waitFor('message', expected);
      seen.push(...msgs.map((e) => Number(e.id)));
      if (expected === 500) {
        // A full page ends the response with `more`; the client reconnects after the last id.
        await c.waitEnd();
        expect(c.events.at(-1)?.event).toBe('more');
        expect(c.events.filter((e) => e.event === 'message')).toHaveLength(500);
      } else {
        expect(c.done).toBe(false);
        c.close();
      }
      after = Number(c.lastEventId());
    }
    expect(seen).toHaveLength(1200);
    expect(new Set(seen).size).toBe(1200);
  });

  it('/healthz stays prompt while 10 clients replay a chat of 100k rows', async () => {
    const s = await startWebServer();
    fill(s.db, 100_000);
    const clients = await Promise.all(
      Array.from({ length: 10 }, () => SseClient.open(`${s.url}/api/chat/stream?group=demo&after=0`)),
    );
    let worst = 0;
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
      worst = Math.max(worst, performance.now() - t0);
    }
    for (const c of clients) c.close();
    // Unpaged, the replays kept the event loop busy for about 8 s.
    expect(worst).toBeLessThan(1500);
  });
});
