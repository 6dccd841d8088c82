import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import type { Hono } from 'hono';
import type { Server } from 'node:http';
import {
  boundConnections,
  DEFAULT_CONNECTION_LIMITS,
  type ConnectionCounts,
  type ConnectionLimits,
  serverOptionsOf,
} from './connections.js';

/** A listening HTTP server. */
export interface HttpServer {
  /** The real base URL, with the port the OS chose when 0 was asked (`http://127.0.0.1:40123`). */
  url: string;
  /** Serves `app` from now on (before this, a server bound without one answers 503 "starting"). */
  serve(app: Hono): void;
  /** Stops listening and ends open connections (SSE streams included); idempotent. */
  close(): Promise<void>;
  /** What the connection bounds did so far (http/connections.ts). */
  readonly connections: ConnectionCounts;
}

/** Where to listen. Port 0 picks a free port. */
export interface ListenOptions {
  host: string;
  port: number;
  /** Caps and timeouts of its connections (default DEFAULT_CONNECTION_LIMITS). */
  connections?: ConnectionLimits;
}

/** What a server bound before its app exists answers: 503, as /healthz does for a part not ready. */
const starting = (): Response =>
  Response.json({ status: 'unavailable', reason: 'gated is starting' }, { status: 503 });

/**
 * Hono compiles its router at the first match: 3–4 ms for gated's routes on an idle machine, more under
 * load. Done when the app is served, so the first request (often a load balancer's /healthz) does not wait
 * for it. No route can be added to the app after this.
 */
function compiled(app: Hono): Hono {
  app.router.match('GET', '/healthz');
  return app;
}

/**
 * Serves a hono app with @hono/node-server. Resolves once listening, or rejects with the bind error
 * (EADDRINUSE, EACCES) so the caller can say which port could not be used. Without `app` the port is bound
 * first and every request answers 503 until `serve(app)`: gated binds before it builds the parts the app
 * reaches, so a port that cannot be bound stops the start before any agent runs.
 */
export async function startHttpServer(app: Hono | undefined, opts: ListenOptions): Promise<HttpServer> {
  // The node server's env (the socket, for the peer address) is passed on to the app.
  let fetch: Hono['fetch'] = app ? compiled(app).fetch : starting;
  const limits = opts.connections ?? DEFAULT_CONNECTION_LIMITS;
  const server = createAdaptorServer({
    fetch: (req: Request, env: unknown) => fetch(req, env),
    hostname: opts.host,
    port: opts.port,
    serverOptions: serverOptionsOf(limits),
  }) as Server;
  const connections = boundConnections(server, limits);
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) =>
      reject(new Error(`cannot listen on ${opts.host}:${opts.port}: ${err.message}`));
    server.once('error', onError);
    server.listen(opts.port, opts.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' || addr.address.includes(':') ? `[${addr.address}]` : addr.address;
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${addr.port}`,
    connections,
    serve(next) {
      fetch = compiled(next).fetch;
    },
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        // SSE responses never end by themselves; without this close() would wait for every browser.
        if ('closeAllConnections' in server) server.closeAllConnections();
      });
      return closing;
    },
  };
}
