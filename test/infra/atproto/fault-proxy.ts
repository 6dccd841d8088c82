/**
 * An HTTP proxy in front of the local PDS that can make the next call of one XRPC method fail: a status
 * with headers (429 with ratelimit-reset, 502, 403, …) or a dropped connection. Everything else is
 * forwarded untouched, so the client under test still speaks to the real PDS. Session answers are
 * rewritten to point at the proxy: the PDS's DID document names its own URL, and the client would
 * otherwise talk to the PDS directly after login.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * One armed failure. `drop` closes the connection without an answer (a network error to the client);
 * `hang` never answers (the client's deadline has to fire). With `after`, the call is forwarded first and
 * the PDS accepts it; only the answer is then dropped or withheld (a lost answer to a write that happened).
 */
export interface Fault {
  status?: number;
  error?: string;
  headers?: Record<string, string>;
  drop?: boolean;
  hang?: boolean;
  after?: boolean;
  /** How many consecutive calls fail. Default 1. */
  times?: number;
}

/** A running proxy. */
export interface FaultProxy {
  readonly url: string;
  /** XRPC method names of every request seen, in order. */
  readonly calls: string[];
  /** When each of `calls` arrived (Date.now()), index for index. */
  readonly callTimes: number[];
  /** JSON bodies of the procedure calls (POSTs) the PDS accepted with a 2xx, in order. */
  readonly accepted: Array<{ nsid: string; input: unknown }>;
  /** Makes the next call(s) of `nsid` fail. */
  failNext(nsid: string, fault: Fault): void;
  close(): Promise<void>;
}

const SESSION_METHODS = new Set([
  'com.atproto.server.createSession',
  'com.atproto.server.refreshSession',
  'com.atproto.server.getSession',
]);

/** Starts a proxy on 127.0.0.1 forwarding to `target` (the PDS URL). */
export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const faults = new Map<string, Fault & { left: number }>();
  const calls: string[] = [];
  const callTimes: number[] = [];
  const accepted: Array<{ nsid: string; input: unknown }> = [];
  let self = '';

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const nsid = /^\/xrpc\/([^?]+)/.exec(req.url ?? '')?.[1] ?? req.url ?? '';
    calls.push(nsid);
    callTimes.push(Date.now());
    const armed = faults.get(nsid);
    const fault: Fault | undefined = armed && armed.left > 0 ? armed : undefined;
    if (armed && fault) armed.left -= 1;
    if (fault && !fault.after) {
      if (fault.drop) return void req.socket.destroy();
      if (fault.hang) return;
      res.writeHead(fault.status ?? 500, { 'content-type': 'application/json', ...fault.headers });
      return void res.end(
        JSON.stringify({ error: fault.error ?? 'InjectedFault', message: 'injected by the test' }),
      );
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (k !== 'host' && k !== 'connection' && typeof v === 'string') headers.set(k, v);
    }
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    const up = await fetch(new URL(req.url ?? '/', target), {
      method: req.method ?? 'GET',
      headers,
      ...(hasBody ? { body: Buffer.concat(chunks) } : {}),
    });
    let body = Buffer.from(await up.arrayBuffer());
    if (up.ok && req.method === 'POST' && /json/.test(req.headers['content-type'] ?? '')) {
      accepted.push({ nsid, input: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown });
    }
    if (fault?.drop) return void req.socket.destroy();
    if (fault?.hang) return;
    if (SESSION_METHODS.has(nsid)) body = Buffer.from(body.toString('utf8').split(origin(target)).join(self));
    const out: Record<string, string> = {};
    up.headers.forEach((v, k) => {
      // fetch already decoded the body and the length may have changed.
      if (!['content-encoding', 'content-length', 'transfer-encoding', 'connection'].includes(k)) out[k] = v;
    });
    res.writeHead(up.status, out);
    res.end(body);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'ProxyError', message: err.message }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  self = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: self,
    calls,
    callTimes,
    accepted,
    failNext(nsid, fault) {
      faults.set(nsid, { ...fault, left: fault.times ?? 1 });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function origin(url: string): string {
  return new URL(url).origin;
}
