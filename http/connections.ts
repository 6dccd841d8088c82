import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionLimits } from '../core/config.js';
import { descriptorLimit } from '../core/descriptors.js';

/**
 * Bounds on the TCP connections of gated's HTTP server (docs/SECURITY.md "Connections"), the way production
 * servers bound them: open connections in all and per client address, a connection that sends no complete
 * request head soon closed, an idle keep-alive connection soon closed, any socket with no traffic at all
 * closed. A connection past a cap is closed at once, before its descriptor is held: thousands of connections
 * that send nothing cannot fill gated's descriptors and starve its runs, its database and its agents.
 */

// The type is the configuration's (core/config.ts), which reads the settings into it.
export type { ConnectionLimits };

/** The defaults. */
export const DEFAULT_CONNECTION_LIMITS: ConnectionLimits = {
  max: null,
  perAddress: 64,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 120_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 60_000,
};

/** The total cap when none is set: this many, unless the descriptor limit is lower than twice that. */
const DEFAULT_MAX = 1000;

/** The total cap in effect: the one set, else the default within half the descriptor limit. */
export function connectionCap(limits: Pick<ConnectionLimits, 'max'>, fdLimit = descriptorLimit()): number {
  if (limits.max !== null) return limits.max;
  return fdLimit === null ? DEFAULT_MAX : Math.max(16, Math.min(DEFAULT_MAX, Math.floor(fdLimit / 2)));
}

/** What the bounds did so far (for tests and the log). */
export interface ConnectionCounts {
  open: number;
  /** Closed at once: their address was at its cap, or every open connection was busy at the total cap. */
  refused: number;
  /** Closed to make room at the total cap: connections with no request in flight, oldest first. */
  evicted: number;
}

interface Conn {
  address: string;
  /** Requests in flight on it (HTTP/1.1: one, or a few pipelined). */
  busy: number;
}

/**
 * Applies `limits` to `server` (before it listens; made with `serverOptionsOf(limits)`). At the total cap a new connection takes the place of
 * the oldest one with no request in flight, first one that never sent a request (what a flood of silent
 * connections is), then an idle keep-alive one; only when every open connection is serving a request is the
 * new one refused. So a flood cannot lock a real client out while its connections sit idle.
 */
export function boundConnections(server: Server, limits: ConnectionLimits): ConnectionCounts {
  const cap = connectionCap(limits);
  const counts: ConnectionCounts = { open: 0, refused: 0, evicted: 0 };
  const conns = new Map<Socket, Conn>();
  const perAddress = new Map<string, number>();
  // Sockets with no request in flight, oldest first (a Set keeps insertion order).
  const fresh = new Set<Socket>();
  const kept = new Set<Socket>();

  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.timeout = limits.idleTimeoutMs;
  // Past the header or request timeout, or a request that cannot be parsed: closed, without an answer.
  // Node 20 leaves such a connection open without a listener, and also after one that writes a 408
  // first (measured: the socket is neither written nor closed); a plain destroy closes it.
  server.on('clientError', (_err: Error, socket: Socket) => socket.destroy());

  const evictOne = (): boolean => {
    const victim = fresh.values().next().value ?? kept.values().next().value;
    if (victim === undefined) return false;
    fresh.delete(victim);
    kept.delete(victim);
    victim.destroy();
    counts.evicted++;
    return true;
  };

  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const mine = perAddress.get(address) ?? 0;
    if (mine >= limits.perAddress || (counts.open >= cap && !evictOne())) {
      counts.refused++;
      socket.destroy();
      return;
    }
    perAddress.set(address, mine + 1);
    counts.open++;
    conns.set(socket, { address, busy: 0 });
    fresh.add(socket);
    socket.once('close', () => {
      conns.delete(socket);
      fresh.delete(socket);
      kept.delete(socket);
      counts.open--;
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left === 0) perAddress.delete(address);
      else perAddress.set(address, left);
    });
  });

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    const conn = conns.get(socket);
    if (conn === undefined) return;
    conn.busy++;
    fresh.delete(socket);
    kept.delete(socket);
    res.once('close', () => {
      // Idle again, now the newest of the keep-alive ones.
      if (--conn.busy === 0 && conns.has(socket)) kept.add(socket);
    });
  });
  return counts;
}

/**
 * The options of `http.createServer` for `limits`: the header and request timeouts count only when given
 * here (set on the server afterwards, Node 20 never applies them), and Node looks for connections past
 * them every `connectionsCheckingInterval` (30 s by default: a silent connection would live 40 s).
 */
export function serverOptionsOf(limits: ConnectionLimits): {
  headersTimeout: number;
  requestTimeout: number;
  keepAliveTimeout: number;
  connectionsCheckingInterval: number;
} {
  return {
    headersTimeout: limits.headersTimeoutMs,
    // Node requires requestTimeout ≥ headersTimeout.
    requestTimeout: Math.max(limits.requestTimeoutMs, limits.headersTimeoutMs),
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4))),
  };
}
