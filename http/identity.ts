import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { Hono, type Context } from 'hono';
import { getCookie, setCookie, deleteCookie } from 'hono/cookie';
import { createMiddleware } from 'hono/factory';
import type { Db } from '../store/db.js';
import { getState } from '../store/state.js';
import { WEB_ADMIN } from '../store/access.js';

/**
 * Who is writing in the web chat (docs/SECURITY.md "Identities", docs/SECURITY.md). gated issues every browser
 * a visitor id in a signed HttpOnly cookie; the sender of its posts is `web:<visitor id>`, and nothing in a
 * request body or query names a sender. Whoever presents GATED_ADMIN_TOKEN (the `Authorization: Bearer`
 * header, or the admin cookie that `POST /api/chat/login` sets after checking the token) writes as
 * `web:admin`, the one web sender access treats as an admin.
 */

/** A request's web identity: the sender its posts carry, and whether it presented the admin token. */
export interface Viewer {
  /** The visitor id gated issued (`v` + 20 hex digits), or `admin`. Never taken from the request. */
  sender: string;
  admin: boolean;
}

/** The visitor cookie: `<visitor id>.<signature>`. */
export const VISITOR_COOKIE = 'gated_visitor';
/** The admin cookie: `<expiry epoch ms>.<signature>`; the signature covers a digest of the token. */
export const ADMIN_COOKIE = 'gated_admin';
/** How long an admin sign-in lasts. */
export const ADMIN_LOGIN_MS = 12 * 3_600_000;

const VISITOR_RE = /^v[0-9a-f]{20}$/;
const KEY_STATE = 'web_cookie_key';
// Browsers keep a cookie at most 400 days.
const VISITOR_MAX_AGE_S = 400 * 24 * 3600;

declare module 'hono' {
  interface ContextVariableMap {
    viewer: Viewer;
  }
}

/**
 * The cookies' HMAC key: 32 random bytes in router_state, made on the first start and kept, so visitors
 * keep their ids across restarts. The insert is one statement, so two processes starting at once agree.
 */
export function cookieKey(db: Db): Buffer {
  const have = getState(db, KEY_STATE);
  if (have) return Buffer.from(have, 'base64');
  db.prepare('INSERT INTO router_state (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING').run(
    KEY_STATE,
    randomBytes(32).toString('base64'),
  );
  return Buffer.from(getState(db, KEY_STATE)!, 'base64');
}

/** The issuer and checker of web identities over one key and one admin token. */
export class WebIdentity {
  private readonly tokenDigest: Buffer | undefined;

  constructor(
    private readonly key: Buffer,
    adminToken: string | undefined,
    private readonly now: () => number = Date.now,
  ) {
    this.tokenDigest = adminToken ? digest(adminToken) : undefined;
  }

  /** True when GATED_ADMIN_TOKEN is set (without it nobody is the web chat's admin). */
  get adminConfigured(): boolean {
    return this.tokenDigest !== undefined;
  }

  /** Compares a presented token with GATED_ADMIN_TOKEN in constant time. */
  tokenValid(token: string | undefined): boolean {
    return (
      this.tokenDigest !== undefined &&
      token !== undefined &&
      timingSafeEqual(digest(token), this.tokenDigest)
    );
  }

  /** The viewer of a request, issuing a visitor cookie when it brought no valid one. */
  viewerOf(c: Context): Viewer {
    const bearer = /^Bearer\s+(.+)$/i.exec(c.req.header('authorization')?.trim() ?? '')?.[1]?.trim();
    const tokenOk = this.tokenValid(bearer);
    // A wrong token counts against the client's address (http/bounds.ts, limitTokenGuesses).
    if (bearer !== undefined && !tokenOk) c.set('tokenRejected', true);
    if (tokenOk || this.adminCookieValid(getCookie(c, ADMIN_COOKIE))) {
      return { sender: WEB_ADMIN, admin: true };
    }
    const visitor = this.visitorOf(getCookie(c, VISITOR_COOKIE));
    if (visitor) return { sender: visitor, admin: false };
    const id = `v${randomBytes(10).toString('hex')}`;
    setCookie(c, VISITOR_COOKIE, `${id}.${this.sign(`visitor:${id}`)}`, {
      ...cookieBase(c),
      sameSite: 'Lax',
      maxAge: VISITOR_MAX_AGE_S,
    });
    return { sender: id, admin: false };
  }

  /** Sets the admin cookie (after the caller checked the token). */
  signIn(c: Context): void {
    const expires = this.now() + ADMIN_LOGIN_MS;
    setCookie(c, ADMIN_COOKIE, `${expires}.${this.adminSignature(expires)}`, {
      ...cookieBase(c),
      sameSite: 'Strict',
      maxAge: Math.floor(ADMIN_LOGIN_MS / 1000),
    });
  }

  /** Removes the admin cookie. */
  signOut(c: Context): void {
    deleteCookie(c, ADMIN_COOKIE, cookieBase(c));
  }

  private visitorOf(raw: string | undefined): string | undefined {
    const dot = raw?.indexOf('.') ?? -1;
    if (!raw || dot < 0) return undefined;
    const id = raw.slice(0, dot);
    return VISITOR_RE.test(id) && sameText(raw.slice(dot + 1), this.sign(`visitor:${id}`)) ? id : undefined;
  }

  private adminCookieValid(raw: string | undefined): boolean {
    const m = raw ? /^(\d{1,15})\.([A-Za-z0-9_-]+)$/.exec(raw) : null;
    if (!m || this.tokenDigest === undefined) return false;
    const expires = Number(m[1]);
    return expires > this.now() && sameText(m[2]!, this.adminSignature(expires));
  }

  // The token's digest is signed in: a changed GATED_ADMIN_TOKEN ends every earlier sign-in.
  private adminSignature(expires: number): string {
    return this.sign(`admin:${expires}:${this.tokenDigest?.toString('hex') ?? ''}`);
  }

  private sign(text: string): string {
    return createHmac('sha256', this.key).update(text, 'utf8').digest('base64url');
  }
}

/**
 * Middleware: sets `c.get('viewer')` for every request it covers (the chat's page and API), issuing the
 * visitor cookie on the first one.
 */
export function identify(identity: WebIdentity) {
  return createMiddleware(async (c, next) => {
    c.set('viewer', identity.viewerOf(c));
    await next();
  });
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** HttpOnly, whole site; Secure when the page was reached over https (directly or through a proxy). */
function cookieBase(c: Context) {
  const https = new URL(c.req.url).protocol === 'https:' || c.req.header('x-forwarded-proto') === 'https';
  return { path: '/', httpOnly: true, secure: https };
}

/**
 * `POST /api/chat/login` (JSON `{"token": …}`, or the Authorization header): with GATED_ADMIN_TOKEN, sets
 * the admin cookie, so the page's posts and streams carry the admin identity (an EventSource cannot send a
 * header). `POST /api/chat/logout` removes it. Wrong tokens are bounded per client address
 * (GATED_LOGIN_FAILURES_PER_HOUR, `limitTokenGuesses` in http/bounds.ts): past it, 429 before any check.
 */
export function identityRoutes(identity: WebIdentity): Hono {
  const app = new Hono();
  app.post('/login', async (c) => {
    if (!identity.adminConfigured) {
      return c.json({ error: 'no admin sign-in: GATED_ADMIN_TOKEN is not set' }, 403);
    }
    const body = (await c.req.json().catch(() => null)) as { token?: unknown } | null;
    const typed = typeof body?.token === 'string' ? body.token : undefined;
    if (!c.get('viewer').admin && !identity.tokenValid(typed)) {
      return c.json({ error: 'the admin token is missing or wrong' }, 401);
    }
    identity.signIn(c);
    return c.json({ sender: `web:${WEB_ADMIN}`, admin: true });
  });
  app.post('/logout', (c) => {
    identity.signOut(c);
    return c.json({ admin: false });
  });
  return app;
}
