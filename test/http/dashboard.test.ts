import { describe, expect, it } from 'vitest';
import { checkRoute } from '../../router/index.js';
import { GithubChannel } from '../../channels/github/index.js';
import { SlackChannel } from '../../channels/slack/index.js';
import { silentLogger } from '../../core/log.js';
import { freePort } from '../infra/atproto/proc.js';
import { SlackApiServer } from '../infra/slack-api.js';
import { getJson, postJson, startWebServer } from './harness.js';

type Obj = Record<string, unknown>;

function addRoute(
  db: import('../../store/db.js').Db,
  seq: number,
  match: string,
  target: string,
  impulse?: string,
) {
  const info = db
    .prepare('INSERT INTO routes (seq, match, target, impulse_config) VALUES (?, ?, ?, ?)')
    .run(seq, match, target, impulse ?? null);
  return Number(info.lastInsertRowid);
}

describe('dashboard JSON', () => {
  it('lists the started channels, connected or still trying, with what each can do', async () => {
    const slackApi = await SlackApiServer.start();
    const slack = new SlackChannel({
      botToken: slackApi.botToken,
      appToken: slackApi.appToken,
      apiUrl: slackApi.apiUrl,
      log: silentLogger(),
    });
    await slack.start(() => null);
    // A GitHub that cannot be reached: the channel is kept and keeps trying.
    const port = await freePort();
    const github = new GithubChannel({
      token: 'ghp_unused',
      webhookSecret: 'secret',
      apiUrl: `http://127.0.0.1:${port}`,
      log: silentLogger(),
    });
    await github.start(() => null);
    try {
      const s = await startWebServer({ channels: () => [slack, github] });
      const r = await getJson(`${s.url}/api/dashboard/channels`);
      expect(r.status).toBe(200);
      expect(r.body.channels).toEqual([
        {
          platform: 'slack',
          connected: true,
          webhook: false,
          drafts: true,
          typing: false,
          buttons: true,
          files: true,
          reactions: true,
          limit: 4000,
          unit: 'chars',
        },
        {
          platform: 'github',
          connected: false,
          webhook: true,
          drafts: true,
          typing: false,
          buttons: false,
          files: false,
          reactions: true,
          limit: 65_000,
          unit: 'chars',
        },
      ]);
    } finally {
      await github.stop();
      await slack.stop();
      await slackApi.close();
    }
  });

  it('shows where agents ran: starts per runtime and node with their start latency, and the lanes', async () => {
    const s = await startWebServer();
    expect((await getJson(`${s.url}/api/dashboard/cluster`)).body).toEqual({
      nodes: [],
      lanesActive: 0,
      lanesWaiting: 0,
    });
    s.metrics.agentStarted('swarm', 'node-b', 0.4);
    s.metrics.agentStarted('swarm', 'node-a', 1.0);
    s.metrics.agentStarted('swarm', 'node-a', 3.0);
    s.metrics.lanes(5, 2);
    const r = await getJson(`${s.url}/api/dashboard/cluster`);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ lanesActive: 5, lanesWaiting: 2 });
    expect(r.body.nodes).toEqual([
      expect.objectContaining({
        runtime: 'swarm',
        node: 'node-a',
        started: 2,
        meanStartSeconds: 2,
        maxStartSeconds: 3,
      }),
      expect.objectContaining({ runtime: 'swarm', node: 'node-b', started: 1, meanStartSeconds: 0.4 }),
    ]);
    // The same starts in /metrics, for a scraper.
    const text = await (await fetch(`${s.url}/metrics`)).text();
    expect(text).toMatch(/gated_agent_starts_total\{runtime="swarm",node="node-a"\} 2/);
  });

  it('lists routes in seq order with validity, reason and hit counts', async () => {
    const s = await startWebServer();
    const late = addRoute(s.db, 99, '', 'default/firehose');
    const bad = addRoute(s.db, 5, 'color=red', 'demo');
    const first = addRoute(s.db, 0, 'room=-5075870332', 'krons/content');
    const imp = addRoute(s.db, 10, 'verb=follow', 'demo', '{"threshold":"lots"}');
    s.db
      .prepare('INSERT INTO route_hits (route_id, hits, last_hit_at) VALUES (?, 3, ?)')
      .run(first, '2026-01-01T00:00:00.000Z');
    s.db.prepare('INSERT INTO route_hits (route_id, hits) VALUES (?, 7)').run(late);
    const r = await getJson(`${s.url}/api/dashboard/routes`);
    const routes = r.body.routes as Obj[];
    expect(routes.map((x) => x.id)).toEqual([first, bad, imp, late]);
    expect(routes[0]).toMatchObject({
      valid: true,
      reason: null,
      hits: 3,
      last_hit_at: '2026-01-01T00:00:00.000Z',
    });
    expect(routes[1]).toMatchObject({
      valid: false,
      hits: 0,
      reason: checkRoute({ match: 'color=red', target: 'demo', impulse_config: null }),
    });
    expect(routes[1]!.reason).toMatch(/unknown key 'color'/);
    expect(routes[2]).toMatchObject({ valid: true });
    expect(routes[2]!.reason).toMatch(/defaults used/);
    expect(routes[3]).toMatchObject({ valid: true, hits: 7, match: '' });
  });

  it('explains, row by row, which route takes a message with the given fields', async () => {
    const s = await startWebServer();
    const a = addRoute(s.db, 0, 'room=-5075870332', 'krons/content');
    const b = addRoute(s.db, 5, 'platform=telegram verb=[', 'demo');
    const c = addRoute(s.db, 10, 'platform=telegram verb=mention', 'rhias/mentions');
    const d = addRoute(s.db, 99, '', 'default/firehose');
    const r = await getJson(`${s.url}/api/dashboard/explain?platform=telegram&room=42&verb=mention`);
    expect(r.status).toBe(200);
    expect(r.body.fields).toEqual({
      platform: 'telegram',
      room: '42',
      chat_jid: 'telegram:42',
      sender: '',
      verb: 'mention',
    });
    const verdicts = (r.body.lines as Obj[]).map((l) => [l.id, l.verdict]);
    expect(verdicts).toEqual([
      [a, 'no-match'],
      [b, 'invalid'],
      [c, 'matched'],
      [d, 'shadowed'],
    ]);
    expect((r.body.lines as Obj[])[0]!.detail).toBe("room='42' does not match '-5075870332'");
    expect(r.body.target).toBe('rhias/mentions');
    expect((r.body.text as string[]).at(-1)).toBe('target: rhias/mentions');
    const none = await getJson(`${s.url}/api/dashboard/explain?platform=discord&room=1`);
    expect(none.body.target).toBe('default/firehose');
    s.db.prepare('DELETE FROM routes WHERE id = ?').run(d);
    const after = await getJson(`${s.url}/api/dashboard/explain?platform=discord&room=1`);
    expect(after.body.target).toBeNull();
    expect((after.body.text as string[]).at(-1)).toBe('target: none');
  });

  it('shows groups, lanes with their age, held chats, recent runs and the outbox', async () => {
    const now = 1_800_000_000_000;
    const s = await startWebServer({ now: () => now, groups: ['demo', 'krons/content'] });
    s.status.lanes.active.push({
      group: 'demo',
      topic: '',
      chat_jid: 'web:demo',
      state: 'running',
      since_ms: now - 1500,
      agent_started_ms: now - 4000,
      run_id: 7,
      not_before_ms: null,
    });
    s.status.lanes.waiting.push({
      group: 'krons/content',
      topic: 'x',
      chat_jid: 'telegram:1',
      state: 'backoff',
      since_ms: now - 60_000,
      agent_started_ms: null,
      run_id: null,
      not_before_ms: now + 5000,
    });
    s.status.held.push({ chat_jid: 'bluesky:did:plc:abc', count: 3, weight: 30, oldest_ms: now - 10_000 });
    s.db
      .prepare(
        `INSERT INTO session_log (group_folder, topic, chat_jid, started_at, result, ended_at, input_tokens,
                                 output_tokens, cost_usd, idle_ms)
         VALUES ('demo', '', 'web:demo', '2027-01-15T08:00:00.000Z', 'ok', '2027-01-15T08:00:31.250Z', 1200,
                 345, 0.0042, 30000)`,
      )
      .run();
    s.db
      .prepare("INSERT INTO session_log (group_folder, topic, chat_jid) VALUES ('demo', 't', 'web:demo')")
      .run();
    const pending = s.db
      .prepare(
        "INSERT INTO messages (chat_jid, content, is_from_me, delivery, kind) VALUES ('telegram:1', 'queued', 1, 'pending', 'reply')",
      )
      .run().lastInsertRowid;
    const failed = s.db
      .prepare(
        "INSERT INTO messages (chat_jid, content, is_from_me, delivery, kind, delivery_error, delivery_attempts) VALUES ('discord:9', 'nope', 1, 'failed', 'reply', '403 Missing Access', 1)",
      )
      .run().lastInsertRowid;
    s.db
      .prepare(
        "INSERT INTO messages (chat_jid, content, is_from_me, delivery, kind) VALUES ('telegram:1', 'done', 1, 'sent', 'reply')",
      )
      .run();

    s.db.prepare(`UPDATE registered_groups SET busy = 'steer' WHERE folder = 'krons/content'`).run();
    const groups = await getJson(`${s.url}/api/dashboard/groups`);
    expect((groups.body.groups as Obj[]).map((g) => g.folder)).toEqual(['demo', 'krons/content']);
    expect((groups.body.groups as Obj[]).map((g) => g.busy)).toEqual(['queue', 'steer']);
    const lanes = await getJson(`${s.url}/api/dashboard/lanes`);
    expect(lanes.body.active).toEqual([
      expect.objectContaining({ state: 'running', age_ms: 1500, agent_age_ms: 4000, run_id: 7 }),
    ]);
    expect(lanes.body.waiting).toEqual([
      expect.objectContaining({ state: 'backoff', age_ms: 60_000, agent_age_ms: null }),
    ]);
    const held = await getJson(`${s.url}/api/dashboard/held`);
    expect(held.body.held).toEqual([
      { chat_jid: 'bluesky:did:plc:abc', count: 3, weight: 30, oldest_ms: now - 10_000, age_ms: 10_000 },
    ]);
    const runs = await getJson(`${s.url}/api/dashboard/runs`);
    expect(
      (runs.body.runs as Obj[]).map((r) => [r.topic, r.result, r.input_tokens, r.output_tokens, r.cost_usd]),
    ).toEqual([
      ['t', null, null, null, null],
      ['', 'ok', 1200, 345, 0.0042],
    ]);
    // A run's time split: 31.25 s from start to exit, 30 s of it idle, so 1.25 s of work; an open run has none.
    expect((runs.body.runs as Obj[]).map((r) => [r.duration_ms, r.work_ms, r.idle_ms])).toEqual([
      [null, null, null],
      [31_250, 1250, 30_000],
    ]);
    const outbox = await getJson(`${s.url}/api/dashboard/outbox`);
    expect((outbox.body.pending as Obj[]).map((o) => o.id)).toEqual([Number(pending)]);
    expect(outbox.body.failed).toEqual([
      expect.objectContaining({
        id: Number(failed),
        chat_jid: 'discord:9',
        delivery_error: '403 Missing Access',
        preview: 'nope',
      }),
    ]);
  });

  it('serves the pages with a strict content security policy and only known assets', async () => {
    const s = await startWebServer();
    const chat = await fetch(`${s.url}/`);
    expect(chat.status).toBe(200);
    expect(chat.headers.get('content-type')).toMatch(/text\/html/);
    expect(chat.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await chat.text()).toContain('/assets/chat.js');
    const dash = await fetch(`${s.url}/dashboard`);
    expect(await dash.text()).toContain('/assets/dashboard.js');
    for (const a of ['chat.js', 'dashboard.js', 'common.js', 'style.css']) {
      expect((await fetch(`${s.url}/assets/${a}`)).status, a).toBe(200);
    }
    expect((await fetch(`${s.url}/assets/..%2fpackage.json`)).status).toBe(404);
    expect((await fetch(`${s.url}/assets/index.html`)).status).toBe(404);
    expect((await fetch(`${s.url}/nowhere`)).status).toBe(404);
  });
});

describe("a group's busy mode on the dashboard", () => {
  const TOKEN = 'busy-admin-token';

  it('is set with the admin token only, audited as the dashboard, a bad mode or group refused by name', async () => {
    const s = await startWebServer({ adminToken: TOKEN, groups: ['ops'] });
    const busyOf = () =>
      s.db.prepare(`SELECT busy FROM registered_groups WHERE folder = 'ops'`).pluck().get() as string;
    const bearer = { Authorization: `Bearer ${TOKEN}` };
    const url = `${s.url}/api/groups/busy`;

    // Reading is the dashboard's (a local client); setting needs the token, a wrong one too is refused.
    expect((await postJson(url, { folder: 'ops', mode: 'steer' })).status).toBe(401);
    expect(
      (await postJson(url, { folder: 'ops', mode: 'steer' }, { Authorization: 'Bearer nope' })).status,
    ).toBe(401);
    expect(busyOf()).toBe('queue');

    expect(await postJson(url, { folder: 'ops', mode: 'steer' }, bearer)).toEqual({
      status: 200,
      body: { folder: 'ops', busy: 'steer' },
    });
    expect(busyOf()).toBe('steer');
    const groups = await getJson(`${s.url}/api/dashboard/groups`);
    expect((groups.body.groups as Obj[]).find((g) => g.folder === 'ops')!.busy).toBe('steer');
    const [row] = s.db
      .prepare(
        `SELECT actor, action, row_key, before, after FROM audit WHERE subject = 'registered_groups' AND action = 'update'`,
      )
      .all() as Obj[];
    expect(row).toMatchObject({ actor: 'dashboard:admin-token', action: 'update', row_key: 'ops' });
    expect(JSON.parse(row!.before as string).busy).toBe('queue');
    expect(JSON.parse(row!.after as string).busy).toBe('steer');

    expect(await postJson(url, { folder: 'ops', mode: 'later' }, bearer)).toEqual({
      status: 400,
      body: { error: "bad busy mode 'later': 'queue', 'steer' or 'interrupt'" },
    });
    expect(await postJson(url, { folder: 'nowhere', mode: 'queue' }, bearer)).toEqual({
      status: 404,
      body: { error: 'no group nowhere' },
    });
    expect((await postJson(url, { mode: 'queue' }, bearer)).status).toBe(400);
    expect(busyOf()).toBe('steer');
  });

  it('cannot be set at all when no admin token is configured', async () => {
    const s = await startWebServer({ groups: ['ops'] });
    expect((await postJson(`${s.url}/api/groups/busy`, { folder: 'ops', mode: 'steer' })).status).toBe(403);
    expect(s.db.prepare(`SELECT busy FROM registered_groups WHERE folder = 'ops'`).pluck().get()).toBe(
      'queue',
    );
  });
});
