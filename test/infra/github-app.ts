/**
 * The GitHub App side of the local GitHub server (test/infra/github-api.ts): an App with a real RSA key pair
 * whose JWTs (RS256 over `{iat, exp, iss}`) are verified as GitHub verifies them, `GET /app` and
 * `POST /app/installations/{id}/access_tokens` under such a JWT, and the installation tokens it issued,
 * accepted on every other endpoint until they expire. Comments written with one are the `<slug>[bot]` user's.
 */
import { createPublicKey, generateKeyPairSync, randomBytes, verify, type KeyObject } from 'node:crypto';
import type { GithubUser } from './github-api.js';

/** An answer of one of the App endpoints. */
export interface AppAnswer {
  status: number;
  body: unknown;
}

/** One installation token the App issued. */
export interface IssuedToken {
  token: string;
  expiresAt: number;
}

/** A JWT may say it was issued this far in GitHub's future (clock drift) and live at most ten minutes. */
const SKEW_S = 60;
const MAX_LIFETIME_S = 10 * 60;

/** A GitHub App installed on one account. */
export class GithubAppAuthority {
  readonly appId = '31337';
  readonly installationId = '4242';
  readonly slug = 'gated-app';
  readonly bot: GithubUser = { login: 'gated-app[bot]', id: 9100, type: 'Bot' };
  /** The App's private key as GitHub hands it out (PKCS#1 PEM): what gated is configured with. */
  readonly privateKeyPem: string;
  /** Every token issued, oldest first. */
  readonly issued: IssuedToken[] = [];
  /** Why JWTs were refused, in order. */
  readonly refusals: string[] = [];
  /** How long an installation token lives (GitHub: one hour). */
  ttlMs = 60 * 60_000;
  private readonly publicKey: KeyObject;

  constructor() {
    const pair = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    this.privateKeyPem = pair.privateKey;
    this.publicKey = createPublicKey(pair.publicKey);
  }

  /** Every issued token stops working now (the hour passed, or the installation was suspended a while). */
  expireAll(): void {
    for (const t of this.issued) t.expiresAt = Math.min(t.expiresAt, Date.now() - 1);
  }

  /** True when `authorization` carries an installation token that is still valid. */
  accepts(authorization: string): boolean {
    const token = authorization.replace(/^(token|Bearer) /, '');
    return this.issued.some((t) => t.token === token && t.expiresAt > Date.now());
  }

  /** Answers `GET /app` and the token exchange (under the App's JWT); undefined for any other request. */
  handle(method: string, path: string, authorization: string): AppAnswer | undefined {
    const exchange = /^\/app\/installations\/([^/]+)\/access_tokens$/.exec(path);
    if (!(method === 'GET' && path === '/app') && !(method === 'POST' && exchange)) return undefined;
    const refused = this.checkJwt(authorization.replace(/^Bearer /, ''));
    if (refused) {
      this.refusals.push(refused);
      return { status: 401, body: { message: refused } };
    }
    if (!exchange)
      return { status: 200, body: { id: Number(this.appId), slug: this.slug, name: 'gated app' } };
    if (exchange[1] !== this.installationId) return { status: 404, body: { message: 'Not Found' } };
    const t: IssuedToken = {
      token: `ghs_${randomBytes(18).toString('hex')}`,
      expiresAt: Date.now() + this.ttlMs,
    };
    this.issued.push(t);
    return {
      status: 201,
      body: {
        token: t.token,
        expires_at: new Date(t.expiresAt).toISOString(),
        permissions: { issues: 'write' },
      },
    };
  }

  /** Why GitHub would refuse this JWT, or null. */
  private checkJwt(jwt: string): string | null {
    const [h, c, sig] = jwt.split('.');
    if (!h || !c || !sig) return 'A JSON web token could not be decoded';
    const header = parse(h) as { alg?: string } | undefined;
    if (header?.alg !== 'RS256') return `'alg' must be RS256`;
    if (!verify('sha256', Buffer.from(`${h}.${c}`), this.publicKey, Buffer.from(sig, 'base64url'))) {
      return 'A JSON web token could not be decoded';
    }
    const claims = parse(c) as { iat?: number; exp?: number; iss?: string | number } | undefined;
    const now = Math.floor(Date.now() / 1000);
    if (!claims || typeof claims.iat !== 'number' || typeof claims.exp !== 'number') {
      return 'Missing iat or exp claim';
    }
    if (String(claims.iss) !== this.appId) return `'Issuer' claim ('iss') must be the App's id`;
    if (claims.iat > now + SKEW_S) return `'Issued at' claim ('iat') is in the future`;
    if (claims.exp <= now) return `'Expiration time' claim ('exp') is in the past`;
    if (claims.exp > now + MAX_LIFETIME_S + SKEW_S)
      return `'Expiration time' claim ('exp') is too far in the future`;
    return null;
  }
}

function parse(part: string): unknown {
  try {
    return JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
}
