/**
 * The GitHub channel: the real @octokit/rest and @octokit/webhooks against the local GitHub server
 * (test/infra/github-api.ts), a real SQLite database and the real delivery.
 */
import { describe, expect, it } from 'vitest';
import { DeliveryError } from '../../core/errors.js';
import { silentLogger } from '../../core/log.js';
import { GithubChannel } from '../../channels/github/index.js';
import { createDelivery } from '../../delivery/delivery.js';
import { insertOutbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';
import { manualSleep } from '../delivery/script-channel.js';
import { GithubApiServer, type GithubFault, type GithubUser } from '../infra/github-api.js';
import { channelConformance, type ConformanceFault } from './conformance.js';
import { cleanupAfterEach, inboundRows, recordingSink, testPart } from './support.js';

const SECRET = 'test-webhook-secret';
const ada: GithubUser = { login: 'ada', id: 42, type: 'User' };
const ISSUE = { owner: 'acme', repo: 'widgets', number: 7 };
const JID = 'github:acme/widgets#7';

const FAULTS: Record<ConformanceFault, GithubFault> = {
  rate_limited: { kind: 'rate_limited', retryAfterS: 3 },
  server_error: { kind: 'server_error' },
  forbidden: { kind: 'forbidden' },
};

const channelFor = (api: GithubApiServer) =>
  new GithubChannel({ token: api.token, webhookSecret: SECRET, apiUrl: api.url, log: silentLogger() });

/** A comment's text as a reader sees it: the invisible idempotency marker is not shown. */
const visible = (body: string) => body.replace(/\n\n<!-- gated:[^>]* -->$/, '');
/** The comment an answer's first part names as the one it answers, in its marker. */
const answers = (body: string) => /<!-- gated:\S+ re:(\d+) -->$/.exec(body)?.[1] ?? null;

channelConformance(
  'github',
  async () => {
    const api = await GithubApiServer.start();
    let current: GithubChannel | undefined;
    let last: string | undefined;
    return {
      jid: JID,
      makeChannel: () => (current = channelFor(api)),
      async inject(text) {
        const payload = api.userComment(ISSUE, ada, `@gated-bot ${text}`);
        last = `d-${api.deliveries.length}`;
        expect(await api.deliver(current!.webhook, 'issue_comment', payload, SECRET, last)).toBe(204);
        const id = String((payload.comment as { id: number }).id);
        return { sender: String(ada.id), verb: 'mention', platform_msg_id: id, content: text };
      },
      async redeliverLast() {
        expect(await api.redeliver(current!.webhook, last!, SECRET)).toBe(204);
      },
      received: () =>
        api.comments
          .filter((c) => c.user.id === api.bot.id)
          .map((c) => ({ text: visible(c.body), replyTo: answers(c.body) })),
      shown: () => api.shown(ISSUE.owner, ISSUE.repo, ISSUE.number).map((c) => visible(c.body)),
      failNext: (fault, n) => api.failNext(FAULTS[fault], n),
      retryAfterMs: 3000,
      close: () => api.close(),
    };
  },
  {
    redelivery: true,
    faults: ['rate_limited', 'server_error', 'forbidden'],
    drafts: true,
    // GitHub has no typing indicator.
    typing: false,
  },
);

describe('github channel', () => {
  const defer = cleanupAfterEach();

  async function setup() {
    const api = await GithubApiServer.start();
    defer(() => api.close());
    const { db } = freshDb();
    const rec = recordingSink(db);
    const channel = channelFor(api);
    await channel.start(rec.sink);
    defer(() => channel.stop());
    return { api, db, rec, channel };
  }

  it('stores mentions in issue and pull-request comments only; ignores its own, bots and edits', async () => {
    const { api, db, channel } = await setup();
    const hook = channel.webhook;
    const pr = { ...ISSUE, number: 12, pull: true };
    const deliveries: Array<[string, Record<string, unknown>]> = [
      ['issue_comment', api.userComment(ISSUE, ada, 'no mention here')],
      ['issue_comment', api.userComment(ISSUE, api.bot, '@gated-bot talking to myself')],
      ['issue_comment', api.userComment(ISSUE, { login: 'ci[bot]', id: 77, type: 'Bot' }, '@gated-bot hi')],
      ['issue_comment', { ...api.userComment(ISSUE, ada, '@gated-bot edited'), action: 'edited' }],
      ['issue_comment', api.userComment(ISSUE, ada, 'cc @gated-bot-two, not us')],
      ['issue_comment', api.userComment(ISSUE, ada, '@Gated-Bot /ping')],
      ['issue_comment', api.userComment(pr, ada, 'what does @gated-bot think of this diff?')],
      ['ping', { zen: 'Keep it logically awesome.' }],
    ];
    for (const [event, payload] of deliveries)
      expect(await api.deliver(hook, event, payload, SECRET)).toBe(204);
    const rows = inboundRows(db).map(({ chat_jid, sender, sender_name, verb, content }) => ({
      chat_jid,
      sender,
      sender_name,
      verb,
      content,
    }));
    expect(rows).toEqual([
      { chat_jid: JID, sender: '42', sender_name: 'ada', verb: 'mention', content: '/ping' },
      {
        chat_jid: 'github:acme/widgets#12',
        sender: '42',
        sender_name: 'ada',
        verb: 'mention',
        content: 'what does @gated-bot think of this diff?',
      },
    ]);
  });

  it('refuses a delivery with a bad or missing signature with 401 and stores nothing', async () => {
    const { api, db, channel } = await setup();
    const payload = api.userComment(ISSUE, ada, '@gated-bot forged');
    expect(await api.deliver(channel.webhook, 'issue_comment', payload, 'not-the-secret')).toBe(401);
    const unsigned = await channel.webhook(
      new Request('http://gated.test/hooks/github', {
        method: 'POST',
        headers: { 'x-github-event': 'issue_comment', 'x-github-delivery': 'x' },
        body: JSON.stringify(payload),
      }),
    );
    expect(unsigned.status).toBe(401);
    // A body that is not even JSON is refused for its signature before anyone tries to parse it.
    const junk = await channel.webhook(
      new Request('http://gated.test/hooks/github', {
        method: 'POST',
        headers: { 'x-github-event': 'issue_comment', 'x-hub-signature-256': 'sha256=00' },
        body: '{not json',
      }),
    );
    expect(junk.status).toBe(401);
    expect(db.prepare('SELECT count(*) FROM messages').pluck().get()).toBe(0);
  });

  it('does not post a part twice when the answer to its create was lost: the marker finds it', async () => {
    const { api, db, channel } = await setup();
    const part = testPart(JID, { messageId: 31, text: 'the answer', createdAt: new Date().toISOString() });
    api.failNext({ kind: 'hang' });
    // The create is stored by GitHub but never answered: the send times out like a crash would cut it.
    const first = channel.send(part);
    await expect(
      Promise.race([first, new Promise((_, rej) => setTimeout(() => rej(new Error('pending')), 300))]),
    ).rejects.toThrow('pending');
    const again = await channel.send(part);
    expect(api.comments.filter((c) => c.user.id === api.bot.id)).toHaveLength(1);
    expect(again).toBe(String(api.comments[0]!.id));
    expect(db).toBeDefined();
  });

  it('waits out rate limits as GitHub announces them: 429, secondary 403, exhausted primary 403', async () => {
    const { api, db, channel } = await setup();
    api.failNext({ kind: 'secondary', retryAfterS: 60 });
    api.failNext({ kind: 'primary', resetInS: 120 });
    const id = insertOutbound(db, { chat_jid: JID, content: 'after the limits', kind: 'reply' });
    const waits = manualSleep(true);
    const d = createDelivery({ db, channels: [channel], log: silentLogger(), pollMs: 0, sleep: waits.sleep });
    defer(() => d.stop());
    d.start();
    await d.idle();
    const ms = waits.waits.map((w) => w.ms);
    expect(ms).toHaveLength(2);
    expect(ms[0]).toBe(60_000);
    expect(ms[1]).toBeGreaterThan(115_000);
    expect(ms[1]).toBeLessThanOrEqual(121_000);
    expect(api.shown(ISSUE.owner, ISSUE.repo, ISSUE.number).map((c) => visible(c.body))).toEqual([
      'after the limits',
    ]);
    expect(db.prepare('SELECT delivery FROM messages WHERE id = ?').pluck().get(id)).toBe('sent');
  });

  it('reacts with GitHub reactions, and refuses what GitHub has none of or what is not an issue', async () => {
    const { api, channel } = await setup();
    const c = api.userComment(ISSUE, ada, 'nice');
    const id = String((c.comment as { id: number }).id);
    await channel.react(JID, id, '🚀');
    await channel.react(JID, id, 'eyes');
    expect(api.comments.find((x) => String(x.id) === id)!.reactions).toEqual(['rocket', 'eyes']);
    await expect(channel.react(JID, id, '🦄')).rejects.toBeInstanceOf(DeliveryError);
    const bad = await channel.send(testPart('github:acme/widgets')).catch((e: unknown) => e);
    expect(bad).toMatchObject({ failure: 'permanent' });
  });
});
