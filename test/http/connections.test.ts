import { connect, type Socket } from 'node:net';
import { Hono } from 'hono';
import { afterEach, describe, expect, it } from 'vitest';
import { startHttpServer, type HttpServer } from '../../http/app.js';
import { connectionCap, type ConnectionLimits } from '../../http/connections.js';
import { deferred } from '../queue/helpers.js';
import { until } from '../helpers/process.js';

const LIMITS: ConnectionLimits = {
  max: 6,
  perAddress: 3,
  headersTimeoutMs: 400,
  requestTimeoutMs: 5_000,
  keepAliveTimeoutMs: 300,
  idleTimeoutMs: 5_000,
};

const servers: HttpServer[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A TCP connection from `from` (any 127/8 address is this machine) that says nothing unless asked. */
async function silent(url: string, from: string): Promise<Socket & { closedBy?: 'server' }> {
  const { hostname, port } = new URL(url);
  const s = connect({ host: hostname, port: Number(port), localAddress: from }) as Socket & {
    closedBy?: 'server';
  };
  sockets.push(s);
  s.on('error', () => {});
  s.on('close', () => (s.closedBy = 'server'));
  await new Promise<void>((resolve, reject) => {
    s.once('connect', resolve);
    s.once('error', reject);
  });
  return s;
}

/** One GET over `socket`, read up to the end of its head: the status code. */
function get(socket: Socket, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    let got = '';
    const onData = (d: Buffer) => {
      got += String(d);
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got);
      if (m && got.includes('\r\n\r\n')) {
        socket.off('data', onData);
        resolve(Number(m[1]));
      }
    };
    socket.on('data', onData);
    socket.once('close', () => reject(new Error(`closed before an answer (${got.length} bytes)`)));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n`);
  });
}

async function server(app: Hono, limits = LIMITS): Promise<HttpServer> {
  const srv = await startHttpServer(app, { host: '127.0.0.1', port: 0, connections: limits });
  servers.push(srv);
  return srv;
}

const isClosed = (s: Socket) => s.closed || s.destroyed;

describe('connection bounds (http/connections.ts)', () => {
  it('closes a connection past the cap of its address at once; other addresses are still served', async () => {
    const srv = await server(new Hono().get('/x', (c) => c.text('ok')));
    for (let i = 0; i < 3; i++) await silent(srv.url, '127.0.0.1');
    const fourth = await silent(srv.url, '127.0.0.1');
    await until(() => isClosed(fourth), 2000, 'the fourth connection of one address closed');
    expect(srv.connections.refused).toBe(1);
    const other = await silent(srv.url, '127.0.0.2');
    expect(await get(other, '/x')).toBe(200);
  });

  it('at the total cap a new connection takes the place of the oldest silent one, not of a busy one', async () => {
    const hold = deferred();
    let inFlight = 0;
    const app = new Hono()
      .get('/x', (c) => c.text('ok'))
      .get('/slow', async (c) => {
        inFlight++;
        await hold.promise;
        return c.text('late');
      });
    const srv = await server(app, { ...LIMITS, headersTimeoutMs: 5_000 });
    // Two busy connections (a request in flight each), then four silent ones from other addresses: full.
    const busy = [await silent(srv.url, '127.0.0.10'), await silent(srv.url, '127.0.0.11')];
    const answers = busy.map((s) => get(s, '/slow'));
    await until(() => inFlight === 2, 2000, 'two requests in flight');
    const idle: Socket[] = [];
    for (let i = 0; i < 4; i++) idle.push(await silent(srv.url, `127.0.0.${20 + i}`));
    await until(() => srv.connections.open === 6, 2000, 'six open connections');
    const canary = await silent(srv.url, '127.0.0.2');
    expect(await get(canary, '/x')).toBe(200);
    expect(srv.connections.evicted).toBe(1);
    await until(() => isClosed(idle[0]!), 2000, 'the oldest silent connection closed');
    expect(idle.slice(1).map(isClosed)).toEqual([false, false, false]);
    hold.resolve();
    expect(await Promise.all(answers)).toEqual([200, 200]);
  });

  it('refuses a new connection when every open one is serving a request', async () => {
    const hold = deferred();
    let inFlight = 0;
    const app = new Hono().get('/slow', async (c) => {
      inFlight++;
      await hold.promise;
      return c.text('late');
    });
    const srv = await server(app, { ...LIMITS, max: 2 });
    const busy = [await silent(srv.url, '127.0.0.10'), await silent(srv.url, '127.0.0.11')];
    const answers = busy.map((s) => get(s, '/slow'));
    await until(() => inFlight === 2, 2000, 'two requests in flight');
    const late = await silent(srv.url, '127.0.0.12');
    await until(() => isClosed(late), 2000, 'the third connection closed');
    expect(srv.connections).toMatchObject({ refused: 1, evicted: 0 });
    hold.resolve();
    expect(await Promise.all(answers)).toEqual([200, 200]);
  });

  it('closes a connection that sends no request head within the headers timeout, and an idle keep-alive one', async () => {
    const srv = await server(new Hono().get('/x', (c) => c.text('ok')));
    const mute = await silent(srv.url, '127.0.0.30');
    const kept = await silent(srv.url, '127.0.0.31');
    expect(await get(kept, '/x')).toBe(200);
    await until(() => isClosed(kept), 5000, 'the keep-alive one closed by the server');
    await until(() => isClosed(mute), 5000, 'the silent one closed by the server');
    expect(mute.closedBy).toBe('server');
    expect(kept.closedBy).toBe('server');
    expect(srv.connections.open).toBe(0);
  });

  it('takes 1,000 as the default cap, within half the descriptor limit', () => {
    expect(connectionCap({ max: null }, 20_000)).toBe(1000);
    expect(connectionCap({ max: null }, 256)).toBe(128);
    expect(connectionCap({ max: null }, null)).toBe(1000);
    expect(connectionCap({ max: 5000 }, 256)).toBe(5000);
  });
});
