import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { coerceError, UsageError } from '../../core/errors.js';
import type { Logger } from '../../core/log.js';

/** A GitHub App installation gated answers as (docs/CHANNELS.md, "GitHub"). */
export interface GithubAppKey {
  /** The App's id (its settings page: "App ID"). */
  appId: string;
  /** The installation on the account or organisation whose repositories gated answers in. */
  installationId: string;
  /** The App's private key, PEM (PKCS#1 `RSA PRIVATE KEY` as GitHub hands it out, or PKCS#8). */
  privateKey: string;
}

/** An installation token and when GitHub said it stops working (epoch ms). */
export interface InstallationToken {
  token: string;
  expiresAt: number;
}

/** The REST API refused the App's credentials (a wrong App id, key or installation): retrying cannot help. */
export class GithubAppRefused extends Error {
  override readonly name = 'GithubAppRefused';
  constructor(
    readonly status: number,
    detail: string,
  ) {
    super(`github app credentials refused (${status}): ${detail}`);
  }
}

/** A token is renewed when it has less than this left (GitHub's live for an hour). */
export const RENEW_BEFORE_MS = 5 * 60_000;
/** How long an App JWT is valid: GitHub takes at most ten minutes. */
const JWT_LIFETIME_S = 9 * 60;
/** How far back a JWT's `iat` is set, for a clock a little ahead of GitHub's (GitHub's own advice). */
const JWT_BACKDATE_S = 60;

const base64url = (b: Buffer | string) => Buffer.from(b).toString('base64url');

/**
 * The JSON Web Token that authenticates as the App itself (RS256 over `{iat, exp, iss}`), for the calls
 * that mint installation tokens and read the App. Signed with node:crypto; the key never leaves the process.
 */
export function appJwt(appId: string, key: KeyObject | string, nowMs: number): string {
  const now = Math.floor(nowMs / 1000);
  const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'JWT' }));
  const claims = base64url(
    JSON.stringify({ iat: now - JWT_BACKDATE_S, exp: now + JWT_LIFETIME_S, iss: appId }),
  );
  const signature = sign('sha256', Buffer.from(`${header}.${claims}`), key);
  return `${header}.${claims}.${base64url(signature)}`;
}

/** What InstallationTokens needs. */
export interface InstallationTokensOptions {
  app: GithubAppKey;
  /** The REST base, default `https://api.github.com`. */
  apiUrl?: string;
  log: Logger;
  now?: () => number;
  /** A call without an answer after this long is aborted (a transient failure). Default 15000. */
  timeoutMs?: number;
}

/**
 * The installation tokens of a GitHub App: minted with `POST /app/installations/{id}/access_tokens` under
 * the App's JWT, kept in memory only, and renewed RENEW_BEFORE_MS before they expire (or at once after a
 * 401, `invalidate`). Callers at the same moment share one request.
 */
export class InstallationTokens {
  private readonly key: KeyObject;
  private readonly api: string;
  private readonly now: () => number;
  private current: InstallationToken | undefined;
  private minting: Promise<InstallationToken> | undefined;
  /** How many tokens were minted (tests and logs). */
  minted = 0;

  constructor(private readonly opts: InstallationTokensOptions) {
    try {
      this.key = createPrivateKey(opts.app.privateKey);
    } catch (err) {
      throw new UsageError(`the GitHub App's private key is not a PEM key: ${coerceError(err).message}`);
    }
    this.api = (opts.apiUrl ?? 'https://api.github.com').replace(/\/$/, '');
    this.now = opts.now ?? Date.now;
  }

  /** A token with more than RENEW_BEFORE_MS left, minted when needed. */
  async token(): Promise<string> {
    const t = this.current;
    if (t && t.expiresAt - this.now() > RENEW_BEFORE_MS) return t.token;
    this.minting ??= this.mint().finally(() => (this.minting = undefined));
    return (await this.minting).token;
  }

  /** Forgets the token (GitHub answered 401 with it: revoked, or the clock was wrong); the next call mints. */
  invalidate(): void {
    this.current = undefined;
  }

  /** The App's slug (`GET /app` under its JWT): the bot answers as `<slug>[bot]`. */
  async slug(): Promise<string> {
    const app = (await this.call('GET', '/app')) as { slug?: unknown };
    if (typeof app.slug !== 'string') throw new Error('github GET /app returned no slug');
    return app.slug;
  }

  private async mint(): Promise<InstallationToken> {
    const path = `/app/installations/${encodeURIComponent(this.opts.app.installationId)}/access_tokens`;
    const body = (await this.call('POST', path)) as { token?: unknown; expires_at?: unknown };
    const expiresAt = Date.parse(String(body.expires_at));
    if (typeof body.token !== 'string' || !Number.isFinite(expiresAt)) {
      throw new Error('github returned no installation token');
    }
    this.current = { token: body.token, expiresAt };
    this.minted += 1;
    this.opts.log.info({ expiresAt: new Date(expiresAt).toISOString() }, 'github installation token minted');
    return this.current;
  }

  /** One call under the App's JWT. 401, 403 and 404 are GithubAppRefused; the rest throws as it fails. */
  private async call(method: string, path: string): Promise<unknown> {
    const res = await fetch(`${this.api}${path}`, {
      method,
      headers: {
        accept: 'application/vnd.github+json',
        authorization: `Bearer ${appJwt(this.opts.app.appId, this.key, this.now())}`,
        'user-agent': 'gated',
        'x-github-api-version': '2022-11-28',
      },
      signal: AbortSignal.timeout(this.opts.timeoutMs ?? 15_000),
    });
    const text = await res.text();
    if (res.status === 401 || res.status === 403 || res.status === 404) {
      throw new GithubAppRefused(res.status, messageOf(text));
    }
    if (!res.ok)
      throw Object.assign(new Error(`github ${method} ${path}: ${res.status}`), { status: res.status });
    return JSON.parse(text) as unknown;
  }
}

function messageOf(text: string): string {
  try {
    return String((JSON.parse(text) as { message?: unknown }).message ?? '').slice(0, 200);
  } catch {
    return text.slice(0, 200);
  }
}
