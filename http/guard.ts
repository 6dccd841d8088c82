import type { MiddlewareHandler } from 'hono';

/** Where the server listens and which other host names it serves. */
export interface HostGuardOptions {
  /** The bound address (GATED_HTTP_HOST). */
  bound?: string;
  /** More names to serve (GATED_HTTP_HOSTS), e.g. behind a reverse proxy. */
  extra?: readonly string[];
}

const ALWAYS = ['localhost', '127.0.0.1', '::1'];
const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** The host name of a `Host` header value or an origin's authority, lower-cased, without port or brackets. */
function hostName(authority: string): string {
  const a = authority.trim().toLowerCase();
  if (a.startsWith('[')) return a.slice(1, a.indexOf(']') < 0 ? undefined : a.indexOf(']'));
  const colon = a.indexOf(':');
  return colon < 0 ? a : a.slice(0, colon);
}

/**
 * Answers only requests addressed to this server by name (421 otherwise), so a web page on another site
 * cannot reach a local-only gated through a DNS name it controls that resolves to 127.0.0.1 (DNS
 * rebinding). State-changing requests from a browser page of another origin (`Origin`, or
 * `Sec-Fetch-Site: cross-site`) are refused with 403; requests without those headers (curl, the CLI) pass.
 */
export function hostGuard(opts: HostGuardOptions): MiddlewareHandler {
  const allowed = new Set([...ALWAYS, ...(opts.extra ?? []).map(hostName)]);
  if (opts.bound) allowed.add(hostName(opts.bound.includes(':') ? `[${opts.bound}]` : opts.bound));
  return async (c, next) => {
    const host = c.req.header('host');
    if (!host || !allowed.has(hostName(host))) {
      return c.json({ error: 'misdirected request: unknown Host (add it to GATED_HTTP_HOSTS)' }, 421);
    }
    if (STATE_CHANGING.has(c.req.method)) {
      const origin = c.req.header('origin');
      let foreign = c.req.header('sec-fetch-site') === 'cross-site';
      if (origin !== undefined) {
        try {
          const u = new URL(origin);
          foreign ||= !allowed.has(hostName(u.host)) || u.host.toLowerCase() !== host.toLowerCase();
        } catch {
          foreign = true; // "null" (a sandboxed frame, a file) or garbage
        }
      }
      if (foreign) return c.json({ error: 'cross-origin request refused' }, 403);
    }
    await next();
    return undefined;
  };
}
