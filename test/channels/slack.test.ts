/**
 * The Slack channel: the real @slack/web-api and @slack/socket-mode against the local Slack server
 * (test/infra/slack-api.ts), a real SQLite database and the real delivery; the HTTP Events API through
 * gated's real HTTP app.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { markdownToMrkdwn } from '../../core/markdown.js';
import { SlackChannel } from '../../channels/slack/index.js';
import { createDelivery } from '../../delivery/delivery.js';
import { insertOutbound } from '../../store/messages.js';
import { freshDb, tempDir } from '../helpers/db.js';
import { until } from '../helpers/process.js';
import { SlackApiServer, signSlackRequest, type SlackFault } from '../infra/slack-api.js';
import { manualSleep } from '../delivery/script-channel.js';
import { channelConformance, type ConformanceFault } from './conformance.js';
import { cleanupAfterEach, inboundRows, recordingSink } from './support.js';
import { rawRequest, startWebServer } from '../http/harness.js';

const ADA = 'U0ADA001';
const SECRET = 'test-signing-secret';

const FAULTS: Record<ConformanceFault, SlackFault> = {
  rate_limited: { status: 429, retryAfterS: 3 },
  server_error: { status: 502 },
  forbidden: { error: 'not_in_channel' },
};

const channelFor = (api: SlackApiServer, extra: { socket?: boolean } = {}) =>
  new SlackChannel({
    botToken: api.botToken,
    ...(extra.socket === false ? {} : { appToken: api.appToken }),
    signingSecret: SECRET,
    apiUrl: api.apiUrl,
    log: silentLogger(),
  });

channelConformance(
  'slack',
  async () => {
    const api = await SlackApiServer.start();
    const push = async (ev: Record<string, unknown>) => api.waitAck(api.pushEvent(api.callback(ev)));
    const posted = (ts: string) => api.posted.find((p) => p.ts === ts);
    return {
      jid: `slack:${api.channelId}`,
      makeChannel: () => channelFor(api),
      async inject(text) {
        const ev = api.messageEvent({ channel: api.channelId, user: ADA, text });
        await push(ev);
        return { sender: ADA, verb: 'message', platform_msg_id: ev.ts as string, content: text };
      },
      async redeliverLast() {
        await api.waitAck(api.redeliverLast());
      },
      received: () =>
        api.posted
          .filter((p) => p.channel === api.channelId && p.files.length === 0)
          .map((p) => ({ text: p.text, replyTo: p.thread_ts ?? null })),
      shown: () => api.shown(api.channelId).map((p) => p.text),
      failNext: (fault, n) => api.failNext(FAULTS[fault], n),
      retryAfterMs: 3000,
      close: () => api.close(),
      async injectFile(name, data, mimetype) {
        const ev = api.messageEvent({
          channel: api.channelId,
          user: ADA,
          text: '',
          files: [{ name, data, mimetype }],
        });
        await push(ev);
        const content = `[attachment: ${name}]`;
        return { sender: ADA, verb: 'message', platform_msg_id: ev.ts as string, content };
      },
      sentFiles: () => api.posted.flatMap((p) => p.files).map((f) => ({ name: f.name, data: f.data })),
      async press(ts, index, user) {
        await api.waitAck(api.pushInteraction(api.blockActions(ts, index, user)));
        return { sender: user };
      },
      buttonsOf: (ts) => {
        const blocks = (posted(ts)?.blocks ?? []) as Array<{
          type: string;
          elements?: Array<{ value: string }>;
        }>;
        return blocks
          .filter((b) => b.type === 'actions')
          .flatMap((b) => (b.elements ?? []).map((e) => e.value));
      },
      textOf: (ts) => posted(ts)?.text ?? '',
    };
  },
  {
    redelivery: true,
    faults: ['rate_limited', 'server_error', 'forbidden'],
    drafts: true,
    files: true,
    buttons: true,
    // Slack shows no typing for bots (docs/CHANNELS.md, "Slack").
    typing: false,
  },
);

describe('slack channel', () => {
  const defer = cleanupAfterEach();

  async function setup(extra: { socket?: boolean } = {}) {
    const api = await SlackApiServer.start();
    defer(() => api.close());
    const { db } = freshDb();
    const rec = recordingSink(db);
    const channel = channelFor(api, extra);
    await channel.start(rec.sink);
    defer(() => channel.stop());
    return { api, db, rec, channel };
  }

  it('answers a mention in a thread under it, keeps a thread as the topic and ignores its own messages', async () => {
    const { api, db, rec, channel } = await setup();
    const c = api.channelId;
    const own = api.messageEvent({ channel: c, user: api.botUserId, text: 'my answer', botId: api.botId });
    const bot = api.messageEvent({ channel: c, user: 'U0OTHER1', text: 'a bot', botId: 'B0OTHER1' });
    const mention = api.messageEvent({ channel: c, user: ADA, text: `<@${api.botUserId}> what is 6*7?` });
    for (const ev of [own, bot, mention]) await api.waitAck(api.pushEvent(api.callback(ev)));
    // The same mention again as `app_mention` (Slack sends both): still one row.
    await api.waitAck(api.pushEvent(api.callback({ ...mention, type: 'app_mention' })));
    const inThread = api.messageEvent({
      channel: c,
      user: ADA,
      text: 'and 7*8 &lt;quickly&gt;',
      thread_ts: mention.ts as string,
    });
    await api.waitAck(api.pushEvent(api.callback({ ...inThread, parent_user_id: api.botUserId })));
    await rec.waitCalls(3);
    const rows = inboundRows(db).map(({ verb, content, topic, platform_msg_id, sender }) => ({
      verb,
      content,
      topic,
      platform_msg_id,
      sender,
    }));
    expect(rows).toEqual([
      // A message outside a thread roots the thread its answer opens: that thread is its topic.
      {
        verb: 'mention',
        content: 'what is 6*7?',
        topic: mention.ts,
        platform_msg_id: mention.ts,
        sender: ADA,
      },
      {
        verb: 'reply',
        content: 'and 7*8 <quickly>',
        topic: mention.ts,
        platform_msg_id: inThread.ts,
        sender: ADA,
      },
    ]);
    // The answer to the mention opens a thread under it, in Slack's mrkdwn.
    insertOutbound(db, {
      chat_jid: `slack:${c}`,
      content: 'It is **42**, see [the docs](https://example.com/a).',
      kind: 'reply',
      reply_to: mention.ts as string,
    });
    const d = createDelivery({ db, channels: [channel], log: silentLogger(), pollMs: 0 });
    defer(() => d.stop());
    d.start();
    await d.idle();
    expect(api.posted.map((p) => ({ text: p.text, thread_ts: p.thread_ts }))).toEqual([
      { text: 'It is *42*, see <https://example.com/a|the docs>.', thread_ts: mention.ts },
    ]);
  });

  it('takes files both ways: a shared file fetched with the token, a reply file uploaded into the thread', async () => {
    const { api, db, rec, channel } = await setup();
    const data = Buffer.from('col\n1\n2\n');
    const ev = api.messageEvent({
      channel: api.channelId,
      user: ADA,
      text: '',
      files: [{ name: 'data.csv', data, mimetype: 'text/csv' }],
    });
    await api.waitAck(api.pushEvent(api.callback(ev)));
    await rec.waitCalls(1);
    const att = rec.seen[0]!.attachments![0]!;
    expect(att).toMatchObject({ name: 'data.csv', mime: 'text/csv', size: data.length, kind: 'document' });
    expect(rec.seen[0]!.content).toBe('[attachment: data.csv]');
    expect((await channel.fetchAttachment(att.source, 1024)).data.equals(data)).toBe(true);
    await expect(channel.fetchAttachment(att.source, 3)).rejects.toThrow(/over the limit/);
    // The token never goes to another host.
    await expect(channel.fetchAttachment('https://attacker.example/x', 1024)).rejects.toThrow(/outside/);

    const dir = tempDir('gated-slack-');
    const path = join(dir, 'chart.png');
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
    writeFileSync(path, png);
    const id = await channel.sendFile({
      messageId: 9,
      chatJid: `slack:${api.channelId}`,
      part: 0,
      parts: 1,
      replyTo: ev.ts as string,
      topic: '',
      previousPartId: null,
      path,
      data: png,
      name: 'chart.png',
      mime: 'image/png',
      as: 'photo',
    });
    const shared = api.posted.flatMap((p) => p.files);
    expect(shared).toHaveLength(1);
    expect(shared[0]).toMatchObject({ id, name: 'chart.png', channel: api.channelId, thread_ts: ev.ts });
    expect(shared[0]!.data.equals(png)).toBe(true);
    expect(db.prepare('SELECT count(*) FROM messages').pluck().get()).toBe(1);
  });

  it('takes the HTTP Events API: challenge answered, signed events stored once, bad signatures refused', async () => {
    const { api, db, rec, channel } = await setup({ socket: false });
    const hook = channel.webhook!;
    const post = (body: string, headers: Record<string, string>) =>
      hook(
        new Request('http://gated.test/hooks/slack', {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body,
        }),
      );
    const challenge = JSON.stringify({ type: 'url_verification', challenge: 'abc123' });
    const ok = await post(challenge, signSlackRequest(SECRET, challenge));
    expect(await ok.json()).toEqual({ challenge: 'abc123' });

    const ev = api.messageEvent({ channel: api.channelId, user: ADA, text: 'over http' });
    const body = JSON.stringify(api.callback(ev));
    const bad = [
      signSlackRequest('wrong-secret', body),
      signSlackRequest(SECRET, body, Date.now() - 10 * 60_000), // a replay from ten minutes ago
      {},
      signSlackRequest(SECRET, `${body} `), // signed for another body
    ];
    for (const headers of bad) expect((await post(body, headers)).status).toBe(401);
    expect(db.prepare('SELECT count(*) FROM messages').pluck().get()).toBe(0);

    expect((await post(body, signSlackRequest(SECRET, body))).status).toBe(200);
    // Slack retries with X-Slack-Retry-Num when it got no answer in time: stored once.
    const retry = await post(body, { ...signSlackRequest(SECRET, body), 'x-slack-retry-num': '1' });
    expect(retry.status).toBe(200);
    await until(() => rec.seen.length === 2, 2000, 'both deliveries handled');
    expect(inboundRows(db).map((r) => r.content)).toEqual(['over http']);
  });

  it('edits a draft into the final answer with chat.update and deletes one a long answer replaces', async () => {
    const { api, channel } = await setup();
    const jid = `slack:${api.channelId}`;
    const ts = await channel.drafts.open(jid, 'Thinking', '', null);
    await channel.drafts.edit(jid, ts, 'Thinking harder', false);
    await channel.drafts.edit(jid, ts, '*Done*', true);
    expect(api.shown(api.channelId).map((p) => p.text)).toEqual(['*Done*']);
    expect(api.posted[0]!.edits).toEqual(['Thinking harder', '*Done*']);
    await channel.drafts.remove(jid, ts);
    await channel.drafts.remove(jid, ts); // gone already: still fine
    expect(api.shown(api.channelId)).toEqual([]);
  });

  it('asks an approval with Block Kit buttons; a press is a button row, stored once, over the socket or HTTP', async () => {
    const { api, db, rec, channel } = await setup();
    const jid = `slack:${api.channelId}`;
    const thread = api.nextTs();
    const ts = await channel.approvals.ask(
      jid,
      'Run `rm -rf build`? <!channel>',
      [
        { label: 'Approve', command: '/approve K7Q2M' },
        { label: 'Reject', command: '/reject K7Q2M' },
      ],
      thread,
    );
    const asked = api.posted.find((p) => p.ts === ts)!;
    expect(asked.thread_ts).toBe(thread);
    expect(JSON.stringify(asked.blocks)).toContain('&lt;!channel&gt;');
    // The notification's text too: Slack reads it as mrkdwn, `<!channel>` in it would notify everyone.
    expect(asked.text).toBe('Run `rm -rf build`? &lt;!channel&gt;');
    const press = api.blockActions(ts, 0, ADA);
    await api.waitAck(api.pushInteraction(press));
    await api.waitAck(api.redeliverLast());
    // Another user presses reject over HTTP (form-encoded `payload=`, signed like every request).
    const form = `payload=${encodeURIComponent(JSON.stringify(api.blockActions(ts, 1, 'U0BOB001')))}`;
    const res = await channel.webhook!(
      new Request('http://gated.test/hooks/slack', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...signSlackRequest(SECRET, form) },
        body: form,
      }),
    );
    expect(res.status).toBe(200);
    await until(() => rec.seen.length === 3, 2000, 'three presses handled');
    const rows = inboundRows(db).map(({ chat_jid, sender, verb, content, topic, platform_msg_id }) => ({
      chat_jid,
      sender,
      verb,
      content,
      topic,
      id: platform_msg_id!.startsWith('ix:'),
    }));
    expect(rows).toEqual([
      { chat_jid: jid, sender: ADA, verb: 'button', content: '/approve K7Q2M', topic: thread, id: true },
      {
        chat_jid: jid,
        sender: 'U0BOB001',
        verb: 'button',
        content: '/reject K7Q2M',
        topic: thread,
        id: true,
      },
    ]);
    await channel.approvals.decided(jid, ts, 'Approved by Ada <!here>');
    expect(asked.text).toBe('Approved by Ada &lt;!here&gt;');
    expect(JSON.stringify(asked.blocks)).not.toContain('actions');
    expect(() => api.blockActions(ts, 0, ADA)).toThrow(/no button/);
  });

  it('honours a 429 Retry-After through delivery and refuses JIDs of other platforms', async () => {
    const { api, db, channel } = await setup();
    api.failNext({ status: 429, retryAfterS: 7 });
    insertOutbound(db, { chat_jid: `slack:${api.channelId}`, content: 'later', kind: 'reply' });
    const id = insertOutbound(db, { chat_jid: 'slack:not a channel', content: 'x', kind: 'reply' });
    const waits = manualSleep(true);
    const d = createDelivery({ db, channels: [channel], log: silentLogger(), pollMs: 0, sleep: waits.sleep });
    defer(() => d.stop());
    d.start();
    await d.idle();
    expect(waits.waits.map((w) => w.ms)).toContain(7000);
    expect(api.posted.map((p) => p.text)).toEqual(['later']);
    const row = db.prepare('SELECT delivery FROM messages WHERE id = ?').pluck().get(id);
    expect(row).toBe('failed');
  });
});

describe('slack mrkdwn', () => {
  it('writes the agent Markdown as mrkdwn and escapes what Slack would read as markup', () => {
    const md = [
      '# Title',
      '**bold** _it_ ~~gone~~ `a<b`',
      '- one\n- two',
      '> quoted',
      '```js\nif (a && b) {}\n```',
      'Hi <!channel> & [x|y](https://e.com/?q=1>2) [bad](javascript:alert(1))',
    ].join('\n\n');
    expect(markdownToMrkdwn(md).split('\n\n')).toEqual([
      '*Title*',
      '*bold* _it_ ~gone~ `a&lt;b`',
      '• one\n• two',
      '> quoted',
      '```\nif (a &amp;&amp; b) {}\n```',
      'Hi &lt;!channel&gt; &amp; <https://e.com/?q=1%3E2|x y> bad',
    ]);
  });
});

describe('slack webhook on the HTTP server', () => {
  const defer = cleanupAfterEach();

  it('passes the Host guard at /hooks/slack only, where the signature decides', async () => {
    const api = await SlackApiServer.start();
    defer(() => api.close());
    const { db } = freshDb();
    const rec = recordingSink(db);
    const channel = channelFor(api, { socket: false });
    await channel.start(rec.sink);
    defer(() => channel.stop());
    const server = await startWebServer({ hooks: (p) => (p === 'slack' ? channel.webhook : undefined) });
    const ev = api.messageEvent({ channel: api.channelId, user: ADA, text: 'through the proxy' });
    const body = JSON.stringify(api.callback(ev));
    // A reverse proxy forwards the public name as Host, and a hook has no Origin of ours.
    const foreign = { host: 'hooks.example.com', origin: 'https://evil.example' };
    const hook = (headers: Record<string, string>) =>
      rawRequest(`${server.url}/hooks/slack`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...foreign, ...headers },
        body,
      });
    expect((await hook({})).status).toBe(401);
    expect((await hook(signSlackRequest(SECRET, body))).status).toBe(200);
    expect(inboundRows(db).map((r) => r.content)).toEqual(['through the proxy']);
    // The rest of the server still refuses that Host and that Origin.
    const dash = await rawRequest(`${server.url}/api/chat/groups`, { headers: foreign });
    expect(dash.status).toBe(421);
    const local = { host: new URL(server.url).host, origin: 'https://evil.example' };
    const post = await rawRequest(`${server.url}/api/chat/send`, {
      method: 'POST',
      headers: local,
      body: '{}',
    });
    expect(post.status).toBe(403);
    const other = await rawRequest(`${server.url}/hooks/github`, { method: 'POST', body: '{}' });
    expect(other.status).toBe(503);
  });
});
