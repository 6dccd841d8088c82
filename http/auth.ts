import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import { createMiddleware } from 'hono/factory';

/**
 * Who may do what over HTTP.
 * - The web chat (`/`, `/api/chat/*`) and `/healthz` are open: the chat is the product, health says nothing.
 *   Who writes in the chat, and what of a members-only chat each may read, is identity.ts and chat-view.ts.
 * - Reading the dashboard and /metrics: a local client (loopback, not relayed by a proxy), or anyone with
 *   the admin token.
 * - Changing anything (routes): only with the admin token, which must be configured (GATED_ADMIN_TOKEN).
 * The token travels in `Authorization: Bearer …` or a `token` form field, never in a URL: a request with a
 * token in its query string is refused, so the habit never starts (URLs end up in logs and histories).
 */
export interface Auth {
  /** Middleware: dashboard reads. */
  read: MiddlewareHandler;
  /** Middleware: mutations. */
  admin: MiddlewareHandler;
  /** Middleware: refuses tokens in query strings. */
  noTokenInUrl: MiddlewareHandler;
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/** True when the client is this machine. A proxy on this machine relays others, so its header counts. */
export function isLocalClient(c: Context): boolean {
  if (c.req.header('x-forwarded-for') || c.req.header('forwarded')) return false;
  let address: string | undefined;
  try {
    // c.env.incoming exists only under @hono/node-server; app.request() in a test has no socket.
    const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined;
    address = env?.incoming?.socket?.remoteAddress;
  } catch {
    return false;
  }
  if (!address) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

async function presentedToken(c: Context): Promise<string | undefined> {
  const header = c.req.header('authorization');
  if (header) {
    const m = /^Bearer\s+(.+)$/i.exec(header.trim());
    return m ? m[1]!.trim() : undefined;
  }
  const type = c.req.header('content-type') ?? '';
  if (c.req.method !== 'GET' && /^(application\/x-www-form-urlencoded|multipart\/form-data)/i.test(type)) {
    const body = await c.req.parseBody();
    const t = body['token'];
    return typeof t === 'string' && t !== '' ? t : undefined;
  }
  return undefined;
}

/** Builds the auth middlewares for a configured token (undefined: no token, so no mutations at all). */
export function createAuth(adminToken: string | undefined): Auth {
  const want = adminToken ? digest(adminToken) : undefined;
  // Both sides hashed to equal length, then compared in constant time: no early exit leaks a prefix.
  const valid = (t: string | undefined) =>
    want !== undefined && t !== undefined && timingSafeEqual(digest(t), want);

  const read = createMiddleware(async (c, next) => {
    if (isLocalClient(c) || valid(await presentedToken(c))) return next();
    const why = want
      ? 'the dashboard needs the admin token (Authorization: Bearer …) from a non-local client'
      : 'the dashboard is open to local clients only; set GATED_ADMIN_TOKEN to allow others';
    return c.json({ error: why }, 401, { 'WWW-Authenticate': 'Bearer realm="gated"' });
  });

  const admin = createMiddleware(async (c, next) => {
    if (!want) return c.json({ error: 'editing is disabled: GATED_ADMIN_TOKEN is not set' }, 403);
    if (valid(await presentedToken(c))) return next();
    return c.json({ error: 'the admin token is missing or wrong' }, 401, {
      'WWW-Authenticate': 'Bearer realm="gated"',
    });
  });

  const noTokenInUrl = createMiddleware(async (c, next) => {
    const q = c.req.queries();
    if ('token' in q || 'admin_token' in q || 'access_token' in q) {
      return c.json(
        { error: 'never put the admin token in a URL; send Authorization: Bearer … instead' },
        400,
      );
    }
    return next();
  });

  return { read, admin, noTokenInUrl };
}
