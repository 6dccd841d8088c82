import { describe, expect, it } from 'vitest';
import { getJson, postJson, startWebServer } from './harness.js';

const TOKEN = 'tok-3f9a0c1d2e-very-secret';
const bearer = { Authorization: `Bearer ${TOKEN}` };
const count = (s: { db: import('../../store/db.js').Db }) =>
  (s.db.prepare('SELECT count(*) AS n FROM routes').get() as { n: number }).n;

describe('admin token: route edits', () => {
  it('refuses edits when no token is configured', async () => {
    const s = await startWebServer();
    const r = await postJson(`${s.url}/api/routes`, { seq: 1, match: '', target: 'demo' }, bearer);
    expect(r).toEqual({ status: 403, body: { error: 'editing is disabled: GATED_ADMIN_TOKEN is not set' } });
    expect(count(s)).toBe(0);
  });

  it('needs the right token, by Bearer header or form field', async () => {
    const s = await startWebServer({ adminToken: TOKEN });
    const route = { seq: 10, match: 'platform=telegram verb=mention', target: 'demo' };
    expect((await postJson(`${s.url}/api/routes`, route)).status).toBe(401);
    expect((await postJson(`${s.url}/api/routes`, route, { Authorization: 'Bearer wrong' })).status).toBe(
      401,
    );
    expect((await postJson(`${s.url}/api/routes`, route, { Authorization: `Bearer ${TOKEN}x` })).status).toBe(
      401,
    );
    expect(count(s)).toBe(0);
    const ok = await postJson(`${s.url}/api/routes`, route, bearer);
    expect(ok.status).toBe(201);
    expect(
      s.db.prepare('SELECT seq, match, target, impulse_config FROM routes WHERE id = ?').get(ok.body.id),
    ).toEqual({
      ...route,
      impulse_config: null,
    });
    const form = await fetch(`${s.url}/api/routes`, {
      method: 'POST',
      body: new URLSearchParams({
        token: TOKEN,
        seq: '20',
        match: 'verb=follow',
        target: 'builtin:drop',
        impulse_config: '',
      }),
    });
    expect(form.status).toBe(201);
    expect(count(s)).toBe(2);
    const wrongForm = await fetch(`${s.url}/api/routes`, {
      method: 'POST',
      body: new URLSearchParams({ token: 'nope', seq: '20', match: '', target: 'demo' }),
    });
    expect(wrongForm.status).toBe(401);
    expect(count(s)).toBe(2);
  });

  it('validates a new route exactly as `gated routes add`', async () => {
    const s = await startWebServer({ adminToken: TOKEN });
    const add = (b: unknown) => postJson(`${s.url}/api/routes`, b, bearer);
    expect(await add({ seq: 1, match: 'color=red', target: 'demo' })).toEqual({
      status: 400,
      body: { error: "route refused: unknown key 'color' (known: platform, room, chat_jid, sender, verb)" },
    });
    expect((await add({ seq: 1, match: 'room=[', target: 'demo' })).body.error).toMatch(
      /^route refused: malformed glob/,
    );
    expect((await add({ seq: 1, match: 'room', target: 'demo' })).body.error).toMatch(/has no '='/);
    expect((await add({ seq: 1, match: '', target: 'Bad/Folder' })).body.error).toMatch(/bad group folder/);
    expect((await add({ seq: 1, match: '', target: 'builtin:nope' })).body.error).toMatch(/unknown builtin/);
    expect((await add({ seq: 1, match: '', target: 'demo', impulse_config: '{"threshold":' })).status).toBe(
      400,
    );
    expect((await add({ seq: 'x', match: '', target: 'demo' })).body.error).toBe(
      "seq must be an integer, got 'x'",
    );
    expect((await add({ seq: 1, match: '' })).body.error).toBe('target is required');
    expect(count(s)).toBe(0);
    expect(
      (
        await add({
          seq: -5,
          match: 'sender=bot_*',
          target: 'daemon:hook',
          impulse_config: '{"threshold":300}',
        })
      ).status,
    ).toBe(201);
    expect(count(s)).toBe(1);
  });

  it('removes a route with the token only', async () => {
    const s = await startWebServer({ adminToken: TOKEN });
    const id = Number(
      s.db.prepare("INSERT INTO routes (seq, match, target) VALUES (0, '', 'demo')").run().lastInsertRowid,
    );
    expect((await fetch(`${s.url}/api/routes/${id}`, { method: 'DELETE' })).status).toBe(401);
    expect(count(s)).toBe(1);
    const del = await fetch(`${s.url}/api/routes/${id}`, { method: 'DELETE', headers: bearer });
    expect(del.status).toBe(200);
    expect(count(s)).toBe(0);
    expect((await fetch(`${s.url}/api/routes/${id}`, { method: 'DELETE', headers: bearer })).status).toBe(
      404,
    );
    const id2 = Number(
      s.db.prepare("INSERT INTO routes (seq, match, target) VALUES (0, '', 'demo')").run().lastInsertRowid,
    );
    const viaForm = await fetch(`${s.url}/api/routes/${id2}/delete`, {
      method: 'POST',
      body: new URLSearchParams({ token: TOKEN }),
    });
    expect(viaForm.status).toBe(200);
    expect(count(s)).toBe(0);
  });
});

describe('admin token: reads, URLs and logs', () => {
  it('opens the dashboard to local clients; others need the token', async () => {
    const s = await startWebServer({ adminToken: TOKEN });
    expect((await getJson(`${s.url}/api/dashboard/routes`)).status).toBe(200);
    expect((await fetch(`${s.url}/metrics`)).status).toBe(200);
    // A proxy on this host relays remote clients: the forwarded header makes the request non-local.
    const relayed = { 'X-Forwarded-For': '203.0.113.9' };
    expect((await getJson(`${s.url}/api/dashboard/routes`, relayed)).status).toBe(401);
    expect((await fetch(`${s.url}/metrics`, { headers: relayed })).status).toBe(401);
    expect((await getJson(`${s.url}/api/dashboard/routes`, { ...relayed, ...bearer })).status).toBe(200);
    // The chat and the health check stay open.
    expect((await getJson(`${s.url}/api/chat/groups`, relayed)).status).toBe(200);
    expect((await fetch(`${s.url}/healthz`, { headers: relayed })).status).toBe(200);
  });

  it('without a configured token, non-local clients cannot read the dashboard at all', async () => {
    const s = await startWebServer();
    const r = await getJson(`${s.url}/api/dashboard/lanes`, { 'X-Forwarded-For': '203.0.113.9', ...bearer });
    expect(r.status).toBe(401);
    expect(r.body.error).toMatch(/set GATED_ADMIN_TOKEN/);
  });

  it('refuses a token in a URL and never writes the token to the log', async () => {
    const s = await startWebServer({ adminToken: TOKEN, captureLog: true });
    const inUrl = await getJson(`${s.url}/api/dashboard/routes?token=${TOKEN}`);
    expect(inUrl.status).toBe(400);
    expect(inUrl.body.error).toMatch(/never put the admin token in a URL/);
    expect(
      (await postJson(`${s.url}/api/routes?access_token=${TOKEN}`, { seq: 0, target: 'demo' })).status,
    ).toBe(400);
    await postJson(`${s.url}/api/routes`, { seq: 0, match: '', target: 'demo' }, bearer);
    await postJson(
      `${s.url}/api/routes`,
      { seq: 0, match: '', target: 'demo' },
      { Authorization: 'Bearer wrong-guess' },
    );
    await fetch(`${s.url}/api/routes`, {
      method: 'POST',
      body: new URLSearchParams({ token: TOKEN, target: 'demo' }),
    });
    const log = s.logText();
    expect(log).toContain('route added from the dashboard');
    expect(log).toContain('"path":"/api/routes"');
    expect(log).not.toContain(TOKEN);
    expect(log).not.toContain('wrong-guess');
    // Nor in any page the server sends.
    for (const p of ['/', '/dashboard', '/assets/dashboard.js', '/api/dashboard/routes']) {
      expect(await (await fetch(`${s.url}${p}`)).text(), p).not.toContain(TOKEN);
    }
  });
});
