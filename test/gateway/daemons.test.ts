import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { insertInbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';
import { row, testGateway } from '../helpers/gateway.js';
import { until } from '../helpers/process.js';

let server: Server | undefined;
afterEach(async () => {
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  server = undefined;
});

/** A real HTTP daemon on 127.0.0.1 answering with the given statuses in turn. */
async function daemon(statuses: number[]) {
  const bodies: unknown[] = [];
  server = createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      bodies.push(JSON.parse(data));
      res.statusCode = statuses.length > 1 ? statuses.shift()! : statuses[0]!;
      res.end();
    });
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies };
}

function setup(url: string) {
  const { db } = freshDb();
  db.prepare(`INSERT INTO daemons (name, url) VALUES ('indexer', ?)`).run(url);
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, '', 'daemon:indexer')`).run();
  // Quick retries for the test; production defaults are 1 s .. 5 min.
  const { gateway } = testGateway(db, { pollMs: 20, daemonRetry: { baseDelayMs: 20, maxDelayMs: 50 } });
  gateway.start();
  return { db, gateway };
}

describe('daemon: targets', () => {
  it('POSTs the message as JSON and marks it done on 2xx', async () => {
    const d = await daemon([204]);
    const { db, gateway } = setup(d.url);
    const id = insertInbound(db, { chat_jid: 'discord:1', sender: 'u', content: 'index me' })!;
    await until(() => row(db, id).state === 'done');
    expect(d.bodies).toEqual([
      expect.objectContaining({ id, chat_jid: 'discord:1', content: 'index me', verb: 'message' }),
    ]);
    gateway.stop();
  });

  it('retries a 5xx with backoff until it answers 2xx', async () => {
    const d = await daemon([503, 500, 200]);
    const { db, gateway } = setup(d.url);
    const id = insertInbound(db, { chat_jid: 'discord:1', sender: 'u', content: 'again' })!;
    await until(() => row(db, id).state === 'done');
    expect(d.bodies).toHaveLength(3);
    expect(db.prepare('SELECT attempts FROM messages WHERE id = ?').pluck().get(id)).toBe(2);
    gateway.stop();
  });

  it('records a 4xx as permanent and does not retry', async () => {
    const d = await daemon([404]);
    const { db, gateway } = setup(d.url);
    const id = insertInbound(db, { chat_jid: 'discord:1', sender: 'u', content: 'nope' })!;
    await until(() => row(db, id).state === 'failed');
    expect(row(db, id).error).toBe('daemon answered 404');
    await new Promise((r) => setTimeout(r, 200));
    expect(d.bodies).toHaveLength(1);
    gateway.stop();
  });
});
