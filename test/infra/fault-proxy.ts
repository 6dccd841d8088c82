/**
 * A reverse proxy on 127.0.0.1 in front of one of the local platform servers (Telegram, Discord, …) that
 * makes chosen requests fail the ways real networks and platforms fail: an error status with headers (5xx,
 * 429 with retry-after), a connection reset before the platform saw the request, a reset after the
 * platform accepted it (the reply is lost on the way back: the case exactly-once delivery has to survive),
 * and a request that never gets an answer (the client's own timeout has to fire). Everything else is
 * forwarded untouched, so the client under test still talks to the real server behind it.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { listenLoopback, type Loopback } from './loopback.js';

/** What an armed fault does to a matching request. */
export type ProxyFault =
  | { kind: 'status'; status: number; body?: unknown; headers?: Record<string, string> }
  /** Closes the connection without forwarding: the platform never sees the request. */
  | { kind: 'reset' }
  /** Forwards, waits for the platform's answer, then closes the connection instead of relaying it. */
  | { kind: 'reset-after' }
  /** Never answers and never forwards. */
  | { kind: 'hang' }
  /** Forwards (the platform accepts), then never relays the answer. */
  | { kind: 'hang-after' };

/** The record of one request that passed through the proxy. */
export interface ProxiedRequest {
  method: string;
  path: string;
  /** The fault applied, if one was armed for it. */
  fault: ProxyFault['kind'] | undefined;
  /** Whether the request reached the server behind the proxy. */
  forwarded: boolean;
}

/** A running proxy. */
export interface FaultProxy {
  /** `http://127.0.0.1:PORT`: use it where the client's API root goes. */
  readonly url: string;
  readonly requests: ProxiedRequest[];
  /**
   * The next `times` requests whose `METHOD path` matches `match.path` (and whose body contains
   * `match.body`, when given) suffer `fault`. Armed faults are tried in the order they were armed.
   */
  arm(match: FaultMatch, fault: ProxyFault, times?: number): void;
  /** Resolves once `n` requests matched `match` (faulted or not). */
  waitFor(match: RegExp, n: number): Promise<void>;
  close(): Promise<void>;
}

/** Which requests an armed fault applies to. */
export interface FaultMatch {
  path: RegExp;
  /** A substring of the request body (a message text, say), to aim at one request among many. */
  body?: string;
}

interface Armed {
  match: FaultMatch;
  fault: ProxyFault;
  left: number;
}

/** Starts a proxy on a free loopback port forwarding to `target` (an origin such as `http://127.0.0.1:9`). */
export async function startFaultProxy(target: string): Promise<FaultProxy> {
  const armed: Armed[] = [];
  const requests: ProxiedRequest[] = [];
  const waiters: Array<() => void> = [];

  const take = (line: string, body: string): ProxyFault | undefined => {
    const hit = armed.find(
      (a) =>
        a.left > 0 && a.match.path.test(line) && (a.match.body === undefined || body.includes(a.match.body)),
    );
    if (!hit) return undefined;
    hit.left -= 1;
    return hit.fault;
  };

  const forward = async (req: IncomingMessage, body: Buffer): Promise<Response> => {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) {
      if (k !== 'host' && k !== 'connection' && typeof v === 'string') headers.set(k, v);
    }
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    return fetch(new URL(req.url ?? '/', target), {
      method: req.method ?? 'GET',
      headers,
      ...(hasBody ? { body } : {}),
    });
  };

  const relay = async (up: Response, res: ServerResponse): Promise<void> => {
    const body = Buffer.from(await up.arrayBuffer());
    const out: Record<string, string> = {};
    up.headers.forEach((v, k) => {
      // fetch already decoded the body, so its length and encoding headers no longer apply.
      if (!['content-encoding', 'content-length', 'transfer-encoding', 'connection'].includes(k)) out[k] = v;
    });
    res.writeHead(up.status, out);
    res.end(body);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const method = req.method ?? 'GET';
    const path = (req.url ?? '/').split('?')[0]!;
    const fault = take(`${method} ${path}`, body.toString('utf8'));
    const entry: ProxiedRequest = { method, path, fault: fault?.kind, forwarded: false };
    requests.push(entry);
    for (const w of waiters.splice(0)) w();
    if (fault?.kind === 'status') {
      const data = JSON.stringify(fault.body ?? { error: 'injected by the fault proxy' });
      res.writeHead(fault.status, { 'content-type': 'application/json', ...fault.headers });
      return void res.end(data);
    }
    if (fault?.kind === 'reset') return void req.socket.destroy();
    if (fault?.kind === 'hang') return;
    const up = await forward(req, body);
    entry.forwarded = true;
    if (fault?.kind === 'reset-after') {
      await up.arrayBuffer();
      return void req.socket.destroy();
    }
    if (fault?.kind === 'hang-after') return void (await up.arrayBuffer());
    await relay(up, res);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'proxy', message: err.message }));
    });
  });
  const loopback: Loopback = await listenLoopback(server);
  return {
    url: `http://127.0.0.1:${loopback.port}`,
    requests,
    arm(match, fault, times = 1) {
      armed.push({ match, fault, left: times });
    },
    async waitFor(match, n) {
      const count = () => requests.filter((r) => match.test(`${r.method} ${r.path}`)).length;
      while (count() < n) await new Promise<void>((resolve) => waiters.push(resolve));
    },
    close: () => loopback.close(),
  };
}
