/**
 * Bounds on what one web client may cause (docs/SECURITY.md), over real HTTP: open SSE streams in all and per
 * client address, uploads in flight, upload bytes per client address per hour. Past a bound: 429 with the
 * reason and Retry-After, and nothing read or stored.
 */
import { request, type ClientRequest } from 'node:http';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../core/config.js';
import { DEFAULT_CLIENT_CAPS } from '../../http/bounds.js';
import { until } from '../helpers/process.js';
import { postJson, startWebServer, visit, type WebServer } from './harness.js';
import { SseClient } from './sse-client.js';

const stream = (s: WebServer, headers: Record<string, string> = {}) =>
  fetch(`${s.url}/api/chat/stream?group=demo`, { headers: { accept: 'text/event-stream', ...headers } });

function form(content: string, bytes: number): FormData {
  const f = new FormData();
  f.append('group', 'demo');
  f.append('content', content);
  f.append('file', new Blob([Buffer.alloc(bytes, 120)], { type: 'text/plain' }), 'data.txt');
  return f;
}

/** An upload whose body is announced in full but held back after its first bytes: it stays in flight. */
function stalledUpload(s: WebServer): ClientRequest {
  const u = new URL(`${s.url}/api/chat/upload`);
  const req = request({
    hostname: u.hostname,
    port: u.port,
    path: u.pathname,
    method: 'POST',
    headers: { 'content-type': 'multipart/form-data; boundary=xyz', 'content-length': '100000' },
  });
  req.on('error', () => undefined);
  req.write('--xyz\r\nContent-Disposition: form-data; name="group"\r\n\r\ndemo\r\n');
  return req;
}

const inboundRows = (s: WebServer) =>
  s.db.prepare("SELECT count(*) FROM messages WHERE chat_jid = 'web:demo'").pluck().get() as number;

describe('client bounds', () => {
  it('defaults: 200 streams in all, 20 per address, 4 uploads at once, 200 MiB per address per hour', () => {
    expect(loadConfig({}).clientCaps).toEqual(DEFAULT_CLIENT_CAPS);
    expect(DEFAULT_CLIENT_CAPS).toEqual({
      sseStreams: 200,
      ssePerAddress: 20,
      uploadsConcurrent: 4,
      uploadBytesPerHour: 200 * 1024 * 1024,
      loginFailuresPerHour: 20,
    });
    expect(loadConfig({ GATED_LOGIN_FAILURES_PER_HOUR: '5' }).clientCaps.loginFailuresPerHour).toBe(5);
    expect(
      loadConfig({
        GATED_SSE_MAX_STREAMS: '7',
        GATED_SSE_MAX_PER_ADDRESS: '3',
        GATED_UPLOADS_MAX_CONCURRENT: '2',
      }).clientCaps,
    ).toMatchObject({ sseStreams: 7, ssePerAddress: 3, uploadsConcurrent: 2 });
    expect(() => loadConfig({ GATED_SSE_MAX_STREAMS: '0' })).toThrow(
      /GATED_SSE_MAX_STREAMS must be an integer >= 1/,
    );
  });

  it('refuses the 21st open stream of one address with 429, and admits one again when a stream ends', async () => {
    const s = await startWebServer();
    const open = await Promise.all(
      Array.from({ length: 20 }, () => SseClient.open(`${s.url}/api/chat/stream?group=demo`)),
    );
    for (const c of open) await c.waitFor('ready', 1);
    const refused = await stream(s);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('10');
    expect(await refused.json()).toEqual({
      error: 'too many open chat streams from 127.0.0.1 (20 per address)',
    });
    expect(s.bounds.openStreams()).toBe(20);
    open.pop()!.close();
    // The server notices the closed connection and frees its place.
    await until(() => s.bounds.openStreams() === 19, 5000, 'the closed stream to be released');
    const again = await SseClient.open(`${s.url}/api/chat/stream?group=demo`);
    await again.waitFor('ready', 1);
    again.close();
    for (const c of open) c.close();
  });

  it('counts streams in all across addresses (a proxy on this host forwards each client address)', async () => {
    const s = await startWebServer({
      clientCaps: { ...DEFAULT_CLIENT_CAPS, sseStreams: 4, ssePerAddress: 2 },
    });
    const from = (addr: string) => ({ 'x-forwarded-for': `203.0.113.9, ${addr}` });
    const a = [await SseClient.open(`${s.url}/api/chat/stream?group=demo`, from('198.51.100.1'))];
    a.push(await SseClient.open(`${s.url}/api/chat/stream?group=demo`, from('198.51.100.1')));
    const third = await stream(s, from('198.51.100.1'));
    expect([third.status, ((await third.json()) as { error: string }).error]).toEqual([
      429,
      'too many open chat streams from 198.51.100.1 (2 per address)',
    ]);
    a.push(await SseClient.open(`${s.url}/api/chat/stream?group=demo`, from('198.51.100.2')));
    a.push(await SseClient.open(`${s.url}/api/chat/stream?group=demo`, from('198.51.100.3')));
    const fifth = await stream(s, from('198.51.100.4'));
    expect([fifth.status, ((await fifth.json()) as { error: string }).error]).toEqual([
      429,
      'too many open chat streams (4 in all)',
    ]);
    for (const c of a) c.close();
  });

  it('refuses a fifth upload while four are in flight, before reading its body', async () => {
    const s = await startWebServer();
    const me = await visit(s.url);
    const stalled = Array.from({ length: 4 }, () => stalledUpload(s));
    await until(() => s.bounds.uploadsInFlight() === 4, 5000, 'four uploads admitted');
    const res = await fetch(`${s.url}/api/chat/upload`, {
      method: 'POST',
      body: form('fifth', 10),
      headers: me.headers,
    });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('5');
    expect(await res.json()).toEqual({ error: 'too many uploads in progress (4 at once)' });
    expect(inboundRows(s)).toBe(0);
    for (const r of stalled) r.destroy();
    // The stalled ones end (their bodies never came) and uploads are admitted again.
    await until(() => s.bounds.uploadsInFlight() === 0, 5000, 'the stalled uploads to end');
    const ok = await fetch(`${s.url}/api/chat/upload`, {
      method: 'POST',
      body: form('later', 10),
      headers: me.headers,
    });
    expect(ok.status).toBe(201);
    expect(inboundRows(s)).toBe(1);
  });

  it('refuses uploads past the bytes per address per hour with 429 and the reason', async () => {
    let now = Date.parse('2026-11-27T03:00:00Z');
    const s = await startWebServer({
      clientCaps: { ...DEFAULT_CLIENT_CAPS, uploadBytesPerHour: 3000 },
      now: () => now,
    });
    const me = await visit(s.url);
    const up = (content: string, bytes: number) =>
      fetch(`${s.url}/api/chat/upload`, { method: 'POST', body: form(content, bytes), headers: me.headers });
    expect((await up('first', 1500)).status).toBe(201);
    const second = await up('second', 1500);
    expect(second.status).toBe(429);
    const body = (await second.json()) as { error: string };
    expect(body.error).toMatch(
      /^upload limit reached: \d+ of 3000 bytes per hour used from 127\.0\.0\.1, this upload announces \d+$/,
    );
    expect(Number(second.headers.get('retry-after'))).toBe(3600);
    expect(inboundRows(s)).toBe(1);
    // An hour later the address may upload again.
    now += 3_600_001;
    expect((await up('third', 1500)).status).toBe(201);
    expect(inboundRows(s)).toBe(2);
  });

  it('refuses admin sign-ins from an address past its wrong tokens of the hour with 429, the right token too', async () => {
    let now = Date.parse('2026-11-27T03:00:00Z');
    const s = await startWebServer({
      adminToken: 'the-right-token',
      clientCaps: { ...DEFAULT_CLIENT_CAPS, loginFailuresPerHour: 3 },
      now: () => now,
    });
    const login = (token: string, headers: Record<string, string> = {}) =>
      postJson(`${s.url}/api/chat/login`, { token }, headers);
    expect((await login('guess-1')).status).toBe(401);
    expect((await login('guess-2')).status).toBe(401);
    // A wrong Bearer header on any chat request is a guess too: no admin, and it counts.
    const bearer = await visit(s.url, { authorization: 'Bearer guess-3' });
    expect(bearer.sender).not.toBe('admin');
    const refused = await fetch(`${s.url}/api/chat/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: 'the-right-token' }),
    });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('3600');
    expect(await refused.json()).toEqual({
      error: 'too many wrong admin tokens from 127.0.0.1 (3 per hour); try again in 3600 s',
    });
    expect(refused.headers.getSetCookie()).toEqual([]);
    expect(await getStatus(s, '/api/chat/me', { authorization: 'Bearer the-right-token' })).toBe(429);
    // A request without a token is not refused: the visitor still chats.
    expect(await getStatus(s, '/api/chat/me')).toBe(200);
    // Another address (a reverse proxy on this machine names it) is counted apart.
    const other = await login('the-right-token', { 'x-forwarded-for': '203.0.113.9' });
    expect(other).toEqual({ status: 200, body: { sender: 'web:admin', admin: true } });
    // An hour after the first wrong token, the address may try again.
    now += 3_600_001;
    expect((await login('the-right-token')).status).toBe(200);
  });
});

async function getStatus(s: WebServer, path: string, headers: Record<string, string> = {}): Promise<number> {
  const res = await fetch(`${s.url}${path}`, { headers });
  await res.arrayBuffer();
  return res.status;
}
