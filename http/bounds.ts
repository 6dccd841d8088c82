import type { Context, MiddlewareHandler } from 'hono';
import { createMiddleware } from 'hono/factory';

/**
 * Bounds on what one web client may cause (docs/SECURITY.md "Bounds on clients"): open SSE
 * streams in all and per client address, uploads in flight, and upload bytes per client address per hour.
 * A request past a bound is answered 429 with the reason and a Retry-After; nothing is read or stored for
 * it. Counts live in memory: a restart ends every stream and upload anyway.
 */

/**
 * The caps (GATED_SSE_MAX_STREAMS, GATED_SSE_MAX_PER_ADDRESS, GATED_UPLOADS_MAX_CONCURRENT,
 * GATED_UPLOAD_BYTES_PER_HOUR, GATED_LOGIN_FAILURES_PER_HOUR).
 */
export interface ClientCaps {
  sseStreams: number;
  ssePerAddress: number;
  uploadsConcurrent: number;
  uploadBytesPerHour: number;
  /** Wrong admin tokens one client address may present in an hour before its attempts get 429. */
  loginFailuresPerHour: number;
}

/** The defaults of the caps. */
export const DEFAULT_CLIENT_CAPS: ClientCaps = {
  sseStreams: 200,
  ssePerAddress: 20,
  uploadsConcurrent: 4,
  uploadBytesPerHour: 200 * 1024 * 1024,
  loginFailuresPerHour: 20,
};

/** A refusal: the reason for the client and how many seconds to wait. */
export interface Refusal {
  reason: string;
  retryAfterS: number;
}

/** One admitted upload; `finish` corrects its charge once its size is known. */
export interface UploadTicket {
  /** Ends the upload; `bytes` replaces the charge made from Content-Length when that was absent. */
  finish(bytes?: number): void;
}

const HOUR = 3_600_000;

declare module 'hono' {
  interface ContextVariableMap {
    /** The bytes of an upload's files, once parsed (its handler sets it). */
    uploadBytes: number;
    /** Set when the request presented an admin token that was wrong (http/identity.ts). */
    tokenRejected: boolean;
  }
}

interface Charge {
  at: number;
  bytes: number;
}

/** The live counts behind the caps. */
export class ClientBounds {
  private streams = 0;
  private readonly streamsBy = new Map<string, number>();
  private uploads = 0;
  private readonly charges = new Map<string, Charge[]>();
  private readonly failures = new Map<string, number[]>();

  constructor(
    readonly caps: ClientCaps = DEFAULT_CLIENT_CAPS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Admits one SSE stream of `address`: returns its release (call it once, when the stream ends). */
  openStream(address: string): (() => void) | Refusal {
    if (this.streams >= this.caps.sseStreams) {
      return { reason: `too many open chat streams (${this.caps.sseStreams} in all)`, retryAfterS: 10 };
    }
    const mine = this.streamsBy.get(address) ?? 0;
    if (mine >= this.caps.ssePerAddress) {
      return {
        reason: `too many open chat streams from ${address} (${this.caps.ssePerAddress} per address)`,
        retryAfterS: 10,
      };
    }
    this.streams += 1;
    this.streamsBy.set(address, mine + 1);
    let open = true;
    return () => {
      if (!open) return;
      open = false;
      this.streams -= 1;
      const left = (this.streamsBy.get(address) ?? 1) - 1;
      if (left > 0) this.streamsBy.set(address, left);
      else this.streamsBy.delete(address);
    };
  }

  /**
   * Admits one upload of `address` that announces `declared` bytes (its Content-Length, or the most an
   * upload may hold when it announces none), charged against the address's hour at once so that parallel
   * uploads cannot all pass the same check.
   */
  beginUpload(address: string, declared: number, exact: boolean): UploadTicket | Refusal {
    if (this.uploads >= this.caps.uploadsConcurrent) {
      return {
        reason: `too many uploads in progress (${this.caps.uploadsConcurrent} at once)`,
        retryAfterS: 5,
      };
    }
    const list = this.recent(address);
    const used = list.reduce((n, c) => n + c.bytes, 0);
    if (used + declared > this.caps.uploadBytesPerHour) {
      const wait = list.length > 0 ? Math.ceil((list[0]!.at + HOUR - this.now()) / 1000) : 3600;
      return {
        reason:
          `upload limit reached: ${used} of ${this.caps.uploadBytesPerHour} bytes per hour used from ` +
          `${address}, this upload announces ${declared}`,
        retryAfterS: Math.max(1, wait),
      };
    }
    const charge: Charge = { at: this.now(), bytes: declared };
    list.push(charge);
    this.charges.set(address, list);
    this.uploads += 1;
    let open = true;
    return {
      finish: (bytes) => {
        if (!open) return;
        open = false;
        this.uploads -= 1;
        if (!exact && bytes !== undefined) charge.bytes = bytes;
      },
    };
  }

  /**
   * Whether `address` may present the admin token now: not after `loginFailuresPerHour` wrong ones within
   * the last hour, until the oldest of them is an hour old.
   */
  admitLogin(address: string): Refusal | undefined {
    const list = this.recentFailures(address);
    if (list.length < this.caps.loginFailuresPerHour) return undefined;
    const wait = Math.max(1, Math.ceil((list[0]! + HOUR - this.now()) / 1000));
    return {
      reason:
        `too many wrong admin tokens from ${address} (${this.caps.loginFailuresPerHour} per hour); ` +
        `try again in ${wait} s`,
      retryAfterS: wait,
    };
  }

  /** Counts one wrong admin token presented by `address`. */
  loginFailed(address: string): void {
    const list = this.recentFailures(address);
    list.push(this.now());
    this.failures.set(address, list);
  }

  /** Open streams now (tests, metrics). */
  openStreams(): number {
    return this.streams;
  }

  /** Uploads admitted and not finished (tests, metrics). */
  uploadsInFlight(): number {
    return this.uploads;
  }

  /** The address's charges of the last hour (older ones dropped; an address with none is forgotten). */
  private recent(address: string): Charge[] {
    const since = this.now() - HOUR;
    const list = (this.charges.get(address) ?? []).filter((c) => c.at > since);
    if (list.length === 0) this.charges.delete(address);
    // Addresses seen once an hour ago are swept now and then, so the map never grows without end.
    if (this.charges.size > 10_000) {
      for (const [a, l] of this.charges) if (l.every((c) => c.at <= since)) this.charges.delete(a);
    }
    return list;
  }

  /** The address's wrong tokens of the last hour (older ones dropped, the map swept like the charges). */
  private recentFailures(address: string): number[] {
    const since = this.now() - HOUR;
    const list = (this.failures.get(address) ?? []).filter((at) => at > since);
    if (list.length === 0) this.failures.delete(address);
    if (this.failures.size > 10_000) {
      for (const [a, l] of this.failures) if (l.every((at) => at <= since)) this.failures.delete(a);
    }
    return list;
  }
}

/**
 * The client's address: the peer of the socket, or, when the peer is this machine and the request carries
 * `X-Forwarded-For`, the address a reverse proxy on this machine appended last (the one it saw). A remote
 * peer's header is never believed.
 */
export function clientAddress(c: Context): string {
  let peer = '';
  try {
    // Only under @hono/node-server; app.request() in a test has no socket.
    const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined;
    peer = env?.incoming?.socket?.remoteAddress ?? '';
  } catch {
    peer = '';
  }
  const loopback = peer === '::1' || peer.startsWith('127.') || peer.startsWith('::ffff:127.');
  const forwarded = c.req.header('x-forwarded-for');
  if (loopback && forwarded) {
    const last = forwarded.split(',').at(-1)?.trim();
    if (last) return last.slice(0, 64);
  }
  return peer || 'unknown';
}

/**
 * Middleware of the upload endpoint, ahead of every body limit and parser: admits the upload or answers
 * 429, so a refused upload costs no memory (a body without Content-Length is otherwise read whole before
 * the handler runs). `maxBodyBytes` is the charge of an upload that announces no length, until its handler
 * says what it carried (`c.set('uploadBytes', n)`).
 */
export function admitUploads(bounds: ClientBounds, maxBodyBytes: number): MiddlewareHandler {
  return createMiddleware(async (c, next) => {
    if (c.req.method !== 'POST') return next();
    const length = c.req.header('content-length');
    const exact = length !== undefined && /^\d{1,15}$/.test(length) && !c.req.header('transfer-encoding');
    const ticket = bounds.beginUpload(clientAddress(c), exact ? Number(length) : maxBodyBytes, exact);
    if ('reason' in ticket) {
      return c.json({ error: ticket.reason }, 429, { 'Retry-After': String(ticket.retryAfterS) });
    }
    try {
      await next();
    } finally {
      ticket.finish(c.get('uploadBytes'));
    }
    return undefined;
  });
}

/** True when a request presents the admin token: a Bearer header, the chat's sign-in, or a form's `token`. */
function presentsToken(c: Context): boolean {
  if (c.req.header('authorization') !== undefined) return true;
  if (c.req.method !== 'POST') return false;
  if (c.req.path === '/api/chat/login') return true;
  // The dashboard's forms may carry the token as a field; chat uploads are forms too, and carry none.
  const form = /^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(
    c.req.header('content-type') ?? '',
  );
  return form && !c.req.path.startsWith('/api/chat/');
}

/**
 * Middleware over every path that takes the admin token (ahead of identify and the dashboard's guards):
 * a client address that presented `loginFailuresPerHour` wrong tokens within the hour gets 429 with the
 * reason for every request presenting one, right or wrong, before it is checked, so the token cannot be
 * guessed at the speed of the server. A wrong token is one answered 401, or one the chat's identity
 * turned down (`tokenRejected`).
 */
export function limitTokenGuesses(bounds: ClientBounds): MiddlewareHandler {
  return createMiddleware(async (c, next) => {
    if (!presentsToken(c)) return next();
    const address = clientAddress(c);
    const refused = bounds.admitLogin(address);
    if (refused) {
      return c.json({ error: refused.reason }, 429, { 'Retry-After': String(refused.retryAfterS) });
    }
    await next();
    if (c.res.status === 401 || c.get('tokenRejected')) bounds.loginFailed(address);
    return undefined;
  });
}
