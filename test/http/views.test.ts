import { describe, expect, it } from 'vitest';
import type { Db } from '../../store/db.js';
import { getJson, postJson, startWebServer } from './harness.js';

type Obj = Record<string, unknown>;

function inbound(db: Db, chat: string, content: string, extra: Obj = {}): number {
  const cols = ['chat_jid', 'sender', 'content', ...Object.keys(extra)];
  const info = db
    .prepare(`INSERT INTO messages (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`)
    .run(chat, String(extra.sender ?? 'u1'), content, ...Object.values(extra));
  return Number(info.lastInsertRowid);
}

function runRow(
  db: Db,
  chat: string,
  result: string | null,
  stderr: string | null = null,
  idleMs: number | null = null,
): number {
  const info = db
    .prepare(
      `INSERT INTO session_log (group_folder, chat_jid, started_at, ended_at, result, stderr_tail, messages, replies,
                                idle_ms)
       VALUES ('demo', ?, '2026-11-20T10:00:00.000Z', ?, ?, ?, 1, 1, ?)`,
    )
    .run(chat, result ? '2026-11-20T10:00:02.500Z' : null, result, stderr, idleMs);
  return Number(info.lastInsertRowid);
}

describe('chat, run and history views', () => {
  it('a chat: inbound and outbound rows with state, route and the answering run; search; pages', async () => {
    const s = await startWebServer();
    const run = runRow(s.db, 'telegram:1', 'ok');
    const asked = inbound(s.db, 'telegram:1', 'what is 50% of 10?', {
      sender: 'ann',
      sender_name: 'Ann',
      state: 'done',
      target: 'demo',
      route_id: 3,
      run_id: run,
    });
    s.db
      .prepare(
        `INSERT INTO messages (chat_jid, content, is_from_me, kind, delivery, reply_to_id)
         VALUES ('telegram:1', 'five', 1, 'reply', 'sent', ?)`,
      )
      .run(asked);
    for (let i = 0; i < 7; i++)
      inbound(s.db, 'telegram:1', `noise ${i}`, { sender: 'bob', state: 'unrouted' });
    inbound(s.db, 'telegram:2', 'elsewhere');

    const chats = (await getJson(`${s.url}/api/dashboard/chats`)).body.chats as Obj[];
    expect(chats.map((c) => [c.chat_jid, c.messages])).toEqual([
      ['telegram:2', 1],
      ['telegram:1', 9],
    ]);
    const found = (await getJson(`${s.url}/api/dashboard/chats?q=gram:2`)).body.chats as Obj[];
    expect(found.map((c) => c.chat_jid)).toEqual(['telegram:2']);

    const all = await getJson(`${s.url}/api/dashboard/chat?jid=telegram:1`);
    const rows = all.body.messages as Obj[];
    expect(rows).toHaveLength(9);
    const reply = rows.find((r) => r.content === 'five')!;
    expect(reply).toMatchObject({ is_from_me: 1, delivery: 'sent', answered_by: run, run_result: 'ok' });
    expect(rows.find((r) => r.id === asked)).toMatchObject({
      state: 'done',
      target: 'demo',
      route_id: 3,
      answered_by: run,
    });

    // "%" is a literal, not a LIKE wildcard; sender matches id or name.
    const pct = (await getJson(`${s.url}/api/dashboard/chat?jid=telegram:1&q=50%25`)).body.messages as Obj[];
    expect(pct.map((r) => r.id)).toEqual([asked]);
    const byName = (await getJson(`${s.url}/api/dashboard/chat?jid=telegram:1&sender=ann`)).body
      .messages as Obj[];
    expect(byName.map((r) => r.id)).toEqual([asked]);

    const page1 = await getJson(`${s.url}/api/dashboard/chat?jid=telegram:1&limit=5`);
    expect((page1.body.messages as Obj[]).length).toBe(5);
    const before = page1.body.next_before as number;
    const page2 = await getJson(`${s.url}/api/dashboard/chat?jid=telegram:1&limit=5&before=${before}`);
    const ids = [...(page1.body.messages as Obj[]), ...(page2.body.messages as Obj[])].map((r) => r.id);
    expect(new Set(ids).size).toBe(9);
    expect(page2.body.next_before).toBeNull();

    // Pages never exceed 500 rows, whatever is asked.
    const big = await getJson(`${s.url}/api/dashboard/chat?jid=telegram:1&limit=100000`);
    expect(big.status).toBe(200);
    expect((await getJson(`${s.url}/api/dashboard/chat`)).status).toBe(400);
    expect((await getJson(`${s.url}/api/dashboard/chat?jid=x:1&before=abc`)).status).toBe(400);
  });

  it('a run: its messages, replies, timings, stderr tail; 404 for an unknown run', async () => {
    const s = await startWebServer();
    const run = runRow(s.db, 'web:demo', 'error', 'Traceback: boom\n', 2000);
    const a = inbound(s.db, 'web:demo', 'hello', {
      state: 'done',
      run_id: run,
      timestamp: '2026-11-20T09:59:59.000Z',
    });
    s.db
      .prepare(`UPDATE messages SET dispatched_at = ? WHERE id = ?`)
      .run(Date.parse('2026-11-20T10:00:00.000Z'), a);
    s.db
      .prepare(
        `INSERT INTO messages (chat_jid, content, is_from_me, kind, delivery, reply_to_id, timestamp)
         VALUES ('web:demo', 'hi back', 1, 'reply', 'pending', ?, '2026-11-20T10:00:01.200Z')`,
      )
      .run(a);
    inbound(s.db, 'web:demo', 'another run', { state: 'done', run_id: run + 1 });
    // Two tool calls of the run's first turn and one of its second, the last refused.
    const start = Date.parse(
      String(s.db.prepare('SELECT started_at FROM session_log WHERE id = ?').pluck().get(run)),
    );
    const call = s.db.prepare(
      `INSERT INTO tool_calls (run_id, turn, call_id, tool, input, input_bytes, input_sha256, decision, decided_by,
         started_at, decided_at, ended_at, output_bytes, error, seq)
       VALUES (?, ?, ?, ?, ?, 1, 'x', ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    call.run(
      run,
      1,
      'a1',
      'Bash',
      '{"command":"ls"}',
      'allow',
      'rules',
      start + 100,
      start + 100,
      start + 400,
      12,
      null,
      1,
    );
    call.run(
      run,
      1,
      'a2',
      'Read',
      '{"file_path":"x"}',
      'allow',
      'rules',
      start + 500,
      start + 500,
      start + 550,
      3,
      null,
      2,
    );
    call.run(
      run,
      2,
      'a3',
      'Bash',
      '{"command":"rm -rf /"}',
      'deny',
      'tool rule 4',
      start + 900,
      start + 900,
      start + 900,
      null,
      'denied',
      3,
    );
    const v = await getJson(`${s.url}/api/dashboard/run/${run}`);
    expect(
      (v.body.tool_calls as Obj[]).map((c) => [c.turn, c.tool, c.decision, c.at_ms, c.duration_ms]),
    ).toEqual([
      [1, 'Bash', 'allow', 100, 300],
      [1, 'Read', 'allow', 500, 50],
      [2, 'Bash', 'deny', 900, 0],
    ]);
    expect(v.status).toBe(200);
    expect((v.body.run as Obj).stderr_tail).toBe('Traceback: boom\n');
    expect((v.body.messages as Obj[]).map((m) => m.content)).toEqual(['hello', 'hi back']);
    // 2.5 s from start to exit, 2 s of it waiting for a follow-up: it worked 0.5 s.
    expect(v.body.timings).toEqual({
      duration_ms: 2500,
      idle_ms: 2000,
      work_ms: 500,
      first_reply_ms: 1200,
      queue_ms: [{ id: a, ms: 1000 }],
    });
    expect((await getJson(`${s.url}/api/dashboard/run/999`)).status).toBe(404);
    expect((await getJson(`${s.url}/api/dashboard/run/x`)).status).toBe(400);
  });

  it('history: the series of a range, live; 400 for an unknown range; says when it is off', async () => {
    const s = await startWebServer({ history: true });
    // A minute written two minutes ago, as a flush would have written it.
    const minute = Math.floor(Date.now() / 60_000);
    s.db
      .prepare(`INSERT INTO metrics_minute (minute, series, label, value) VALUES (?, 'runs', 'ok', 4)`)
      .run(minute - 2);
    const r = await getJson(`${s.url}/api/dashboard/history?range=hour`);
    expect(r.status).toBe(200);
    expect(r.body.step).toBe(1);
    const minutes = r.body.minutes as number[];
    expect(minutes).toHaveLength(60);
    const ok = (r.body.series as Record<string, Record<string, number[]>>).runs!.ok!;
    expect(ok[minutes.indexOf(minute - 2)]).toBe(4);
    expect(ok.reduce((a, b) => a + b, 0)).toBe(4);
    const week = await getJson(`${s.url}/api/dashboard/history?range=week`);
    expect(week.body.step).toBe(30);
    expect((await getJson(`${s.url}/api/dashboard/history?range=year`)).status).toBe(400);
    const off = await startWebServer();
    expect((await getJson(`${off.url}/api/dashboard/history`)).body).toMatchObject({
      off: true,
      minutes: [],
    });
  });

  it('admin actions need the token; stop, retry and release answer by what happened', async () => {
    const calls: string[] = [];
    const s = await startWebServer({
      adminToken: 'sekret',
      admin: {
        stopRun: async (id) => (calls.push(`stop ${id}`), id === 7),
        retryChat: (jid) => (calls.push(`retry ${jid}`), 2),
      },
    });
    const bearer = { Authorization: 'Bearer sekret' };
    expect((await postJson(`${s.url}/api/admin/runs/7/stop`, {})).status).toBe(401);
    expect(calls).toEqual([]);
    expect(await postJson(`${s.url}/api/admin/runs/7/stop`, {}, bearer)).toEqual({
      status: 200,
      body: { stopped: true },
    });
    expect((await postJson(`${s.url}/api/admin/runs/8/stop`, {}, bearer)).status).toBe(409);
    expect(await postJson(`${s.url}/api/admin/chats/retry`, { chat_jid: 'telegram:1' }, bearer)).toEqual({
      status: 200,
      body: { retried: 2 },
    });
    expect((await postJson(`${s.url}/api/admin/chats/retry`, {}, bearer)).status).toBe(400);
    expect((await postJson(`${s.url}/api/admin/chats/release`, { chat_jid: 'a:1' }, bearer)).status).toBe(
      501,
    );
    expect(calls).toEqual(['stop 7', 'stop 8', 'retry telegram:1']);
  });

  it('serves the chart library from node_modules', async () => {
    const s = await startWebServer();
    const js = await fetch(`${s.url}/assets/vendor/uplot.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/javascript/);
    expect(await js.text()).toMatch(/export \{ uPlot as default \}|export default/);
    expect((await fetch(`${s.url}/assets/vendor/uplot.css`)).status).toBe(200);
    expect((await fetch(`${s.url}/assets/vendor/left-pad.js`)).status).toBe(404);
  });
});
