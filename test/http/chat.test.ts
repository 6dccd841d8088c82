import { describe, expect, it } from 'vitest';
import { WEB_LIMIT } from '../../channels/web/index.js';
import { splitText } from '../../core/text.js';
import { until } from '../helpers/process.js';
import { getJson, postJson, reply, startWebServer, visit } from './harness.js';
import { SseClient } from './sse-client.js';

interface Line {
  id: number;
  role: string;
  content: string;
  topic: string;
  sender: string;
}
const lines = (evs: { data: string }[]) => evs.map((e) => JSON.parse(e.data) as Line);

describe('web chat: posting', () => {
  it('stores a post as an inbound web:<folder> row with its topic, through the sink', async () => {
    const s = await startWebServer();
    const me = await visit(s.url);
    expect(me.sender).toMatch(/^v[0-9a-f]{20}$/);
    const r = await postJson(
      `${s.url}/api/chat/send`,
      { group: 'demo', topic: 'support', content: 'hello there', clientMsgId: 'm1', name: 'Ann' },
      me.headers,
    );
    expect(r.status).toBe(201);
    const row = s.db.prepare('SELECT * FROM messages WHERE id = ?').get(r.body.id) as Record<string, unknown>;
    expect(row).toMatchObject({
      chat_jid: 'web:demo',
      topic: 'support',
      content: 'hello there',
      sender: me.sender,
      sender_name: 'Ann',
      verb: 'message',
      is_from_me: 0,
      platform_msg_id: `${me.sender}-m1`,
    });
    expect(s.woken).toEqual([r.body.id]);
  });

  it('stores a retried post (same clientMsgId) once', async () => {
    const s = await startWebServer();
    const body = { group: 'demo', content: 'once', clientMsgId: 'same' };
    const me = await visit(s.url);
    const a = await postJson(`${s.url}/api/chat/send`, body, me.headers);
    const b = await postJson(`${s.url}/api/chat/send`, body, me.headers);
    expect(a.status).toBe(201);
    expect(b).toEqual({ status: 200, body: { id: null, duplicate: true } });
    expect(s.db.prepare("SELECT count(*) AS n FROM messages WHERE chat_jid = 'web:demo'").get()).toEqual({
      n: 1,
    });
  });

  it('refuses bad input with a reason and stores nothing', async () => {
    const s = await startWebServer();
    const send = (body: unknown) => postJson(`${s.url}/api/chat/send`, body);
    expect((await send({ group: 'nope', content: 'x' })).status).toBe(404);
    expect(await send({ group: '../etc', content: 'x' })).toEqual({
      status: 400,
      body: { error: "bad group folder '../etc'" },
    });
    expect(await send({ group: 'demo', topic: 'a b', content: 'x' })).toEqual({
      status: 400,
      body: { error: "bad topic 'a b'" },
    });
    expect(await send({ group: 'demo', content: '   ' })).toEqual({
      status: 400,
      body: { error: 'empty message' },
    });
    const form = await fetch(`${s.url}/api/chat/send`, {
      method: 'POST',
      body: new URLSearchParams({ group: 'demo', content: 'x' }),
    });
    expect(form.status).toBe(415);
    const tooLong = await send({ group: 'demo', content: 'x'.repeat(WEB_LIMIT + 1) });
    expect(tooLong).toEqual({ status: 400, body: { error: `message longer than ${WEB_LIMIT} characters` } });
    const huge = await send({ group: 'demo', content: '\u{1F600}'.repeat(WEB_LIMIT * 2) });
    expect(huge).toEqual({ status: 413, body: { error: 'request body too large' } });
    expect(s.db.prepare('SELECT count(*) AS n FROM messages').get()).toEqual({ n: 0 });
  });

  it('lists registered groups to pick from', async () => {
    const s = await startWebServer({ groups: ['demo', 'krons/content'] });
    const r = await getJson(`${s.url}/api/chat/groups`);
    expect(r.body.groups).toEqual([
      { folder: 'demo', name: 'demo' },
      { folder: 'krons/content', name: 'krons/content' },
    ]);
  });
});

describe('web chat: history', () => {
  it("returns the topic's inbound and outbound rows in order, status lines marked", async () => {
    const s = await startWebServer();
    const p = await postJson(`${s.url}/api/chat/send`, { group: 'demo', topic: 't1', content: 'hi' });
    await reply(s, 'demo', 't1', '[tool] reading files');
    await reply(s, 'demo', 't1', 'thinking', 'status');
    await reply(s, 'demo', 't1', 'echo: hi');
    await reply(s, 'demo', 'other', 'not this topic');
    const h = await getJson(`${s.url}/api/chat/history?group=demo&topic=t1`);
    const got = (h.body.lines as Line[]).map((l) => [l.role, l.content]);
    expect(got).toEqual([
      ['user', 'hi'],
      ['status', 'reading files'],
      ['status', 'thinking'],
      ['agent', 'echo: hi'],
    ]);
    expect((h.body.lines as Line[])[0]!.id).toBe(p.body.id);
    const limited = await getJson(`${s.url}/api/chat/history?group=demo&topic=t1&limit=2`);
    expect((limited.body.lines as Line[]).map((l) => l.content)).toEqual(['thinking', 'echo: hi']);
  });
});

describe('web chat: SSE stream', () => {
  it('pushes a reply sent through web.send() to the subscribers of that topic only', async () => {
    const s = await startWebServer();
    const t1 = await SseClient.open(`${s.url}/api/chat/stream?group=demo&topic=t1&after=0`);
    const t2 = await SseClient.open(`${s.url}/api/chat/stream?group=demo&topic=t2&after=0`);
    await t1.waitFor('ready', 1);
    await t2.waitFor('ready', 1);
    const id = await reply(s, 'demo', 't1', 'for t1');
    const [ev] = await t1.waitFor('message', 1);
    expect(ev!.id).toBe(String(id));
    expect(lines([ev!])[0]).toMatchObject({ id, role: 'agent', content: 'for t1', topic: 't1' });
    const id2 = await reply(s, 'demo', 't2', 'for t2');
    expect(lines(await t2.waitFor('message', 1))[0]).toMatchObject({ id: id2, content: 'for t2' });
    expect(t2.events.filter((e) => e.event === 'message')).toHaveLength(1);
    expect(t1.events.filter((e) => e.event === 'message')).toHaveLength(1);
  });

  it("echoes a tab's own post without an id, so the cursor never skips an undelivered reply", async () => {
    const s = await startWebServer();
    const sse = await SseClient.open(`${s.url}/api/chat/stream?group=demo&after=0`);
    await sse.waitFor('ready', 1);
    const p = await postJson(`${s.url}/api/chat/send`, { group: 'demo', content: 'ping?' });
    const [ev] = await sse.waitFor('message', 1);
    expect(ev!.id).toBeUndefined();
    expect(lines([ev!])[0]).toMatchObject({ id: p.body.id, role: 'user', content: 'ping?' });
  });

  it('replays what was missed after a reconnect with Last-Event-ID, and nothing before it', async () => {
    const s = await startWebServer();
    const first = await SseClient.open(`${s.url}/api/chat/stream?group=demo&topic=t&after=0`);
    const a = await reply(s, 'demo', 't', 'one');
    const b = await reply(s, 'demo', 't', 'two');
    await first.waitFor('message', 2);
    expect(first.lastEventId()).toBe(String(b));
    first.close();
    // While the tab is away: a reply delivered to nobody, a post from another tab, a status line.
    const c = await reply(s, 'demo', 't', 'three');
    const d = (await postJson(`${s.url}/api/chat/send`, { group: 'demo', topic: 't', content: 'four' })).body
      .id as number;
    const e = await reply(s, 'demo', 't', 'five', 'status');
    const again = await SseClient.open(`${s.url}/api/chat/stream?group=demo&topic=t&after=0`, {
      'Last-Event-ID': first.lastEventId()!,
    });
    const got = await again.waitFor('message', 3);
    expect(lines(got).map((l) => [l.id, l.role, l.content])).toEqual([
      [c, 'agent', 'three'],
      [d, 'user', 'four'],
      [e, 'status', 'five'],
    ]);
    expect(got.map((g) => g.id)).toEqual([String(c), String(d), String(e)]);
    expect(a).toBeLessThan(b);
    // Then live again, without repeating the replay.
    const f = await reply(s, 'demo', 't', 'six');
    const all = await again.waitFor('message', 4);
    expect(lines(all).map((l) => l.id)).toEqual([c, d, e, f]);
  });

  it('streams a split reply part by part; only its last part moves the cursor; a cut-off tab gets it whole', async () => {
    const s = await startWebServer();
    const content = `${'a'.repeat(WEB_LIMIT - 10)}\n\n${'b'.repeat(100)}`;
    const parts = splitText(content, s.web.limit, s.web.limitUnit);
    expect(parts).toHaveLength(2);
    const id = Number(
      s.db
        .prepare(
          `INSERT INTO messages (chat_jid, sender, content, topic, is_from_me, delivery, kind)
           VALUES ('web:demo', 'gated', ?, '', 1, 'pending', 'reply')`,
        )
        .run(content).lastInsertRowid,
    );
    const part = (n: number) => ({
      messageId: id,
      chatJid: 'web:demo',
      text: parts[n]!,
      part: n,
      parts: parts.length,
      replyTo: null,
      topic: '',
      previousPartId: null,
    });
    // Live only: a tab that opened after its history was loaded.
    const tab = await SseClient.open(`${s.url}/api/chat/stream?group=demo`);
    await tab.waitFor('ready', 1);
    await s.web.send(part(0));
    const [p0] = await tab.waitFor('message', 1);
    expect(p0!.id).toBeUndefined();
    expect(JSON.parse(p0!.data)).toMatchObject({ id, part: 0, content: parts[0] });
    // The tab drops out between the parts; its cursor never passed the row.
    expect(tab.lastEventId()).toBeUndefined();
    tab.close();
    await s.web.send(part(1));
    const back = await SseClient.open(`${s.url}/api/chat/stream?group=demo&after=0`);
    const [whole] = await back.waitFor('message', 1);
    expect(whole!.id).toBe(String(id));
    expect(JSON.parse(whole!.data)).toMatchObject({ id, part: null, content });
    // A tab that stays connected sees both parts, the last one with the id.
    const live = await SseClient.open(`${s.url}/api/chat/stream?group=demo`);
    await live.waitFor('ready', 1);
    await s.web.send(part(0));
    await s.web.send(part(1));
    const got = await live.waitFor('message', 2);
    expect(got.map((e) => [e.id, (JSON.parse(e.data) as { part: number }).part])).toEqual([
      [undefined, 0],
      [String(id), 1],
    ]);
  });

  it('uses ?after= when there is no Last-Event-ID, and follows live only without either', async () => {
    const s = await startWebServer();
    const a = await reply(s, 'demo', '', 'old');
    const b = await reply(s, 'demo', '', 'newer');
    const fromA = await SseClient.open(`${s.url}/api/chat/stream?group=demo&after=${a}`);
    expect(lines(await fromA.waitFor('message', 1)).map((l) => l.id)).toEqual([b]);
    const live = await SseClient.open(`${s.url}/api/chat/stream?group=demo`);
    await live.waitFor('ready', 1);
    const c = await reply(s, 'demo', '', 'live');
    expect(lines(await live.waitFor('message', 1)).map((l) => l.id)).toEqual([c]);
  });

  it('sends typing on/off to every topic of the chat', async () => {
    const s = await startWebServer();
    const sse = await SseClient.open(`${s.url}/api/chat/stream?group=demo&topic=x`);
    await sse.waitFor('ready', 1);
    await s.web.typing('web:demo', true);
    await s.web.typing('web:other', true);
    await s.web.typing('web:demo', false);
    const t = await sse.waitFor('typing', 2);
    expect(t.map((e) => JSON.parse(e.data))).toEqual([{ on: true }, { on: false }]);
  });

  it('refuses a stream for an unknown group, and ends every stream when the channel stops', async () => {
    const s = await startWebServer();
    const bad = await fetch(`${s.url}/api/chat/stream?group=ghost`);
    expect(bad.status).toBe(404);
    const sse = await SseClient.open(`${s.url}/api/chat/stream?group=demo`);
    await sse.waitFor('ready', 1);
    expect(s.web.subscriberCount()).toBe(1);
    await s.web.stop();
    await sse.waitEnd();
    expect(s.web.subscriberCount()).toBe(0);
    const after = await postJson(`${s.url}/api/chat/send`, { group: 'demo', content: 'x' });
    expect(after.status).toBe(503);
  });

  it('unsubscribes when the browser goes away', async () => {
    const s = await startWebServer();
    const sse = await SseClient.open(`${s.url}/api/chat/stream?group=demo`);
    await sse.waitFor('ready', 1);
    expect(s.web.subscriberCount()).toBe(1);
    sse.close();
    // The server notices the closed socket on its next write; a delivery is such a write.
    await until(
      async () => {
        await reply(s, 'demo', '', 'anyone?');
        return s.web.subscriberCount() === 0;
      },
      5000,
      'the closed stream unsubscribed',
    );
    expect(s.web.subscriberCount()).toBe(0);
  });
});
