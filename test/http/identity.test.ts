/**
 * Web chat identities over real HTTP on a real SQLite file (docs/SECURITY.md "Identities"): gated issues the
 * visitor id in a signed HttpOnly cookie and never takes a sender from the request; the admin is whoever
 * presents GATED_ADMIN_TOKEN; a members-only group's history, stream and files show a stranger only its own
 * lines and the answers to them.
 */
import { describe, expect, it } from 'vitest';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Hono } from 'hono';
import { cookieKey, WebIdentity } from '../../http/identity.js';
import { getJson, postJson, startWebServer, visit, type WebServer } from './harness.js';
import { SseClient } from './sse-client.js';

const TOKEN = 'admin-token-for-tests-0123456789';

function members(s: WebServer, folder: string, mode: 'members' | 'approval', sender?: string) {
  s.db.prepare('UPDATE registered_groups SET access = ? WHERE folder = ?').run(mode, folder);
  if (sender) {
    s.db
      .prepare(`INSERT INTO members (group_folder, sender, role) VALUES (?, ?, 'member')`)
      .run(folder, `web:${sender}`);
  }
}

/** A reply to a post, delivered as the outbox would: reply_to is the post's platform id. */
async function answer(s: WebServer, folder: string, to: number, content: string): Promise<number> {
  const post = s.db.prepare('SELECT platform_msg_id FROM messages WHERE id = ?').get(to) as {
    platform_msg_id: string;
  };
  const id = Number(
    s.db
      .prepare(
        `INSERT INTO messages (chat_jid, sender, content, topic, is_from_me, delivery, kind, reply_to, reply_to_id)
         VALUES (?, 'gated', ?, '', 1, 'pending', 'reply', ?, ?)`,
      )
      .run(`web:${folder}`, content, post.platform_msg_id, to).lastInsertRowid,
  );
  await s.web.send({
    messageId: id,
    chatJid: `web:${folder}`,
    text: content,
    part: 0,
    parts: 1,
    replyTo: post.platform_msg_id,
    topic: '',
    previousPartId: null,
  });
  return id;
}

const contents = (lines: unknown) => (lines as { content: string }[]).map((l) => l.content);

describe('web identities', () => {
  it('issues a signed visitor id and ignores any sender the request names', async () => {
    const s = await startWebServer();
    const res = await fetch(`${s.url}/`);
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith('gated_visitor='));
    expect(cookie).toMatch(
      /^gated_visitor=v[0-9a-f]{20}\.[A-Za-z0-9_-]+; Max-Age=\d+; Path=\/; HttpOnly; SameSite=Lax$/,
    );

    const me = await visit(s.url);
    // The same cookie keeps the same id; the chat's fields cannot change it.
    expect((await getJson(`${s.url}/api/chat/me`, me.headers)).body).toEqual({
      sender: `web:${me.sender}`,
      admin: false,
    });
    const r = await postJson(
      `${s.url}/api/chat/send`,
      { group: 'demo', content: 'hi', client: 'boss', sender: 'admin', clientMsgId: 'a1' },
      me.headers,
    );
    expect(r.status).toBe(201);
    expect(s.db.prepare('SELECT sender, platform_msg_id FROM messages WHERE id = ?').get(r.body.id)).toEqual({
      sender: me.sender,
      platform_msg_id: `${me.sender}-a1`,
    });

    // A visitor id with a forged signature, or another's id with this one's signature, is not believed:
    // the request gets an id of its own.
    const [id, sig] = me.cookie.slice('gated_visitor='.length).split('.');
    for (const forged of [`v${'0'.repeat(20)}.${sig}`, `${id}.${sig!.slice(1)}A`, 'admin', `admin.${sig}`]) {
      const other = await getJson(`${s.url}/api/chat/me`, { cookie: `gated_visitor=${forged}` });
      expect(other.body.sender).not.toBe(`web:${me.sender}`);
      expect(other.body).toMatchObject({
        admin: false,
        sender: expect.stringMatching(/^web:v[0-9a-f]{20}$/),
      });
    }
  });

  it('the admin is whoever presents GATED_ADMIN_TOKEN: the header, or the cookie its sign-in sets', async () => {
    const s = await startWebServer({ adminToken: TOKEN });
    const bearer = { authorization: `Bearer ${TOKEN}` };
    expect((await getJson(`${s.url}/api/chat/me`, bearer)).body).toEqual({
      sender: 'web:admin',
      admin: true,
    });
    const wrong = await getJson(`${s.url}/api/chat/me`, { authorization: 'Bearer nope' });
    expect(wrong.body.admin).toBe(false);

    const me = await visit(s.url);
    expect((await postJson(`${s.url}/api/chat/login`, { token: 'nope' }, me.headers)).status).toBe(401);
    const res = await fetch(`${s.url}/api/chat/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...me.headers },
      body: JSON.stringify({ token: TOKEN }),
    });
    expect(res.status).toBe(200);
    const admin = res.headers.getSetCookie().find((c) => c.startsWith('gated_admin='))!;
    expect(admin).toMatch(/HttpOnly; SameSite=Strict$/);
    const signedIn = { cookie: `${me.cookie}; ${admin.split(';')[0]}` };
    expect((await getJson(`${s.url}/api/chat/me`, signedIn)).body).toEqual({
      sender: 'web:admin',
      admin: true,
    });
    const post = await postJson(`${s.url}/api/chat/send`, { group: 'demo', content: '/status' }, signedIn);
    expect(s.db.prepare('SELECT sender FROM messages WHERE id = ?').pluck().get(post.body.id)).toBe('admin');
    // An admin cookie is worth nothing with another key's signature or after the token changed.
    const tampered = admin.split(';')[0]!.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
    expect((await getJson(`${s.url}/api/chat/me`, { cookie: tampered })).body.admin).toBe(false);
    // A sign-in made under one token is worth nothing once GATED_ADMIN_TOKEN changed (same cookie key).
    const key = cookieKey(s.db);
    const viewerUnder = (token: string) =>
      new Hono().get('/me', (c) => c.json(new WebIdentity(key, token).viewerOf(c)));
    const ask = async (token: string) =>
      ((await (await viewerUnder(token).request('/me', { headers: signedIn })).json()) as { admin: boolean })
        .admin;
    expect(await ask(TOKEN)).toBe(true);
    expect(await ask(`${TOKEN}-changed`)).toBe(false);

    // Without a configured token there is no admin at all.
    const none = await startWebServer();
    expect((await postJson(`${none.url}/api/chat/login`, { token: '' })).status).toBe(403);
  });

  it('a members-only chat shows a stranger its own lines and their answers, in history, stream and files', async () => {
    const s = await startWebServer({ adminToken: TOKEN, groups: ['demo', 'club'] });
    const member = await visit(s.url);
    const stranger = await visit(s.url);
    members(s, 'club', 'approval', member.sender);

    const send = (v: { headers: Record<string, string> }, content: string, id: string) =>
      postJson(`${s.url}/api/chat/send`, { group: 'club', content, clientMsgId: id }, v.headers);
    const secret = await send(member, 'the members plan', 'm1');
    await answer(s, 'club', secret.body.id as number, 'the agent answers the member');
    const knock = await send(stranger, 'may I join?', 's1');
    await answer(s, 'club', knock.body.id as number, 'your pairing code is ABCD2345');

    const history = (v: { headers: Record<string, string> }) =>
      getJson(`${s.url}/api/chat/history?group=club`, v.headers);
    const all = [
      'the members plan',
      'the agent answers the member',
      'may I join?',
      'your pairing code is ABCD2345',
    ];
    expect(contents((await history(member)).body.lines)).toEqual(all);
    expect(contents((await history({ headers: { authorization: `Bearer ${TOKEN}` } })).body.lines)).toEqual(
      all,
    );
    const seen = await history(stranger);
    expect(contents(seen.body.lines)).toEqual(['may I join?', 'your pairing code is ABCD2345']);
    expect(seen.body.restricted).toMatch(new RegExp(`club answers its members only.*web:${stranger.sender}`));

    // The replay and the live stream: a member's post and its answer never reach the stranger's stream,
    // its own answer does (the positive line proves the stream was live when the others passed).
    const sse = await SseClient.open(`${s.url}/api/chat/stream?group=club&after=0`, stranger.headers);
    await sse.waitFor('message', 2);
    const live = await send(member, 'another members line', 'm2');
    await answer(s, 'club', live.body.id as number, 'another answer for members');
    await s.web.typing('web:club', true);
    const mine = await send(stranger, 'still there?', 's2');
    await answer(s, 'club', mine.body.id as number, 'still waiting for an owner');
    const got = await sse.waitFor('message', 4);
    expect(got.map((e) => (JSON.parse(e.data) as { content: string }).content)).toEqual([
      'may I join?',
      'your pairing code is ABCD2345',
      'still there?',
      'still waiting for an owner',
    ]);
    expect(sse.events.some((e) => e.event === 'typing' || e.event === 'draft')).toBe(false);
    sse.close();

    // A file of a member's line is as unknown to the stranger as a missing one; the member gets it.
    mkdirSync(join(s.groupsDir, 'club', 'inbox'), { recursive: true });
    writeFileSync(join(s.groupsDir, 'club', 'inbox', 'plan.txt'), 'members only');
    s.db
      .prepare(
        `INSERT INTO attachments (message_id, seq, kind, name, mime, size, source, state, path)
         VALUES (?, 0, 'document', 'plan.txt', 'text/plain', 12, 'upload:x', 'saved', 'inbox/plan.txt')`,
      )
      .run(secret.body.id);
    s.db.prepare(`UPDATE messages SET group_folder = 'club' WHERE id = ?`).run(secret.body.id);
    const file = (v: { headers: Record<string, string> }) =>
      fetch(`${s.url}/api/chat/file?group=club&id=${secret.body.id}&seq=0`, { headers: v.headers });
    expect((await file(stranger)).status).toBe(404);
    const ok = await file(member);
    expect([ok.status, await ok.text()]).toEqual([200, 'members only']);

    // Which other chats share the members' session is theirs to know too.
    s.db
      .prepare(
        `INSERT INTO session_log (group_folder, topic, chat_jid) VALUES ('club', '', 'telegram:-100500')`,
      )
      .run();
    const shared = (v: { headers: Record<string, string> }) =>
      getJson(`${s.url}/api/chat/shared?group=club`, v.headers);
    expect((await shared(member)).body).toEqual({ chats: ['telegram:-100500'] });
    expect((await shared(stranger)).body).toEqual({ chats: [] });

    // Once an owner lets the stranger in, it reads the whole chat.
    s.db
      .prepare(`INSERT INTO members (group_folder, sender, role) VALUES ('club', ?, 'member')`)
      .run(`web:${stranger.sender}`);
    expect((await history(stranger)).body.lines).toHaveLength(8);
    expect((await history(stranger)).body.restricted).toBeUndefined();
  });
});
