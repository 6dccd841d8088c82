/**
 * The GitHub channel as a GitHub App: gated signs the App's JWT (RS256, node:crypto), exchanges it for an
 * installation token at the local GitHub server (test/infra/github-app.ts checks the JWT as GitHub does),
 * answers with that token as `<slug>[bot]`, renews it before it expires and after GitHub refuses it.
 */
import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import { silentLogger } from '../../core/log.js';
import { GithubChannel, InstallationTokens } from '../../channels/github/index.js';
import { freshDb } from '../helpers/db.js';
import { GithubApiServer, type GithubUser } from '../infra/github-api.js';
import { cleanupAfterEach, inboundRows, recordingSink, sendFailure, testPart } from './support.js';

const SECRET = 'test-webhook-secret';
const ada: GithubUser = { login: 'ada', id: 42, type: 'User' };
const ISSUE = { owner: 'acme', repo: 'widgets', number: 7 };
const JID = 'github:acme/widgets#7';

describe('github app', () => {
  const defer = cleanupAfterEach();

  async function setup() {
    const api = await GithubApiServer.start();
    defer(() => api.close());
    const app = api.installApp();
    const key = { appId: app.appId, installationId: app.installationId, privateKey: app.privateKeyPem };
    return { api, app, key };
  }

  it('answers as <slug>[bot] with an installation token: mentions of @slug in, comments out', async () => {
    const { api, app, key } = await setup();
    const { db } = freshDb();
    const rec = recordingSink(db);
    const channel = new GithubChannel({
      app: key,
      webhookSecret: SECRET,
      apiUrl: api.url,
      log: silentLogger(),
    });
    await channel.start(rec.sink);
    defer(() => channel.stop());
    expect(channel.identity).toEqual({ username: 'gated-app' });
    expect(app.issued).toHaveLength(1);

    const mention = api.userComment(ISSUE, ada, '@gated-app why does the build fail?');
    expect(await api.deliver(channel.webhook, 'issue_comment', mention, SECRET)).toBe(204);
    const own = api.userComment(ISSUE, app.bot, '@gated-app an answer of mine');
    expect(await api.deliver(channel.webhook, 'issue_comment', own, SECRET)).toBe(204);
    expect(inboundRows(db).map((r) => [r.sender, r.verb, r.content])).toEqual([
      ['42', 'mention', 'why does the build fail?'],
    ]);

    const id = await channel.send(
      testPart(JID, { text: 'A missing lockfile.', createdAt: new Date().toISOString() }),
    );
    const mine = api.comments.filter(
      (c) => c.user.id === app.bot.id && c.body.startsWith('A missing lockfile.'),
    );
    expect(mine.map((c) => String(c.id))).toEqual([id]);
    // One token served the start and the send; the personal token was never involved.
    expect(app.issued).toHaveLength(1);
    expect(app.refusals).toEqual([]);
  });

  it('renews the token before it expires, and at once after GitHub refuses it', async () => {
    const { api, app, key } = await setup();
    let clock = Date.now();
    const tokens = new InstallationTokens({
      app: key,
      apiUrl: api.url,
      log: silentLogger(),
      now: () => clock,
    });
    app.ttlMs = 6 * 60_000;
    const first = await tokens.token();
    expect(await tokens.token()).toBe(first);
    // 4.5 minutes left, under the 5 minutes of margin: the next call mints a new one.
    clock += 90_000;
    const [a, b] = await Promise.all([tokens.token(), tokens.token()]);
    expect(a).toBe(b);
    expect(a).not.toBe(first);
    expect(app.issued.map((t) => t.token)).toEqual([first, a]);

    // GitHub stops taking the token before its time: the refused send is retried by delivery, and the
    // retry mints a fresh token.
    app.ttlMs = 60 * 60_000;
    const channel = new GithubChannel({
      app: key,
      webhookSecret: SECRET,
      apiUrl: api.url,
      log: silentLogger(),
    });
    await channel.start(() => null);
    defer(() => channel.stop());
    const before = app.issued.length;
    app.expireAll();
    const failed = await sendFailure(channel, testPart(JID, { text: 'first try' }));
    expect(failed).toBeInstanceOf(DeliveryError);
    expect(failed).toMatchObject({ failure: 'transient', status: 401 });
    expect(await channel.send(testPart(JID, { text: 'second try' }))).toMatch(/^\d+$/);
    expect(app.issued).toHaveLength(before + 1);
    expect(api.comments.filter((c) => c.user.id === app.bot.id).map((c) => c.body.split('\n')[0])).toEqual([
      'second try',
    ]);
  });

  it('fails the start when GitHub refuses the App: another key, or another installation', async () => {
    const { api, app, key } = await setup();
    const other = generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    }).privateKey;
    const make = (k: typeof key) =>
      new GithubChannel({ app: k, webhookSecret: SECRET, apiUrl: api.url, log: silentLogger() });
    await expect(make({ ...key, privateKey: other }).start(() => null)).rejects.toThrow(/refused \(401\)/);
    expect(app.refusals).toEqual(['A JSON web token could not be decoded']);
    // The App is known (GET /app), the installation is not: no token, no start.
    await expect(make({ ...key, installationId: '1' }).start(() => null)).rejects.toThrow(/refused \(404\)/);
    expect(() => make({ ...key, privateKey: 'not a key' })).toThrow(/not a PEM key/);
  });
});
