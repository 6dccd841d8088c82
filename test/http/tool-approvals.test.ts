import { describe, expect, it } from 'vitest';
import { toolApprovalsOf } from '../../store/tool-approvals.js';
import { getJson, postJson, startWebServer, type WebServer } from './harness.js';

/** The dashboard's tool approvals API (docs/APPROVALS.md, "Dashboard") over a real database. */

const TOKEN = 'tool-approvals-test-token-0123456789';

function ask(s: WebServer, tool: string, line: string, now: number) {
  return toolApprovalsOf(s.db).insert({
    group_folder: 'demo',
    topic: '',
    chat_jid: 'telegram:-1',
    run_id: 1,
    ask_id: 'a1',
    turn_rows: [],
    tool,
    input_json: JSON.stringify({ command: line }),
    input_line: line,
    summary: null,
    approvers: 'owners',
    rule_id: null,
    created_at: now,
    expires_at: now + 600_000,
  });
}

describe('dashboard: tool approvals', () => {
  it('lists pending and decided rows; deciding needs the admin token; the first decision wins', async () => {
    const s = await startWebServer({ adminToken: TOKEN });
    const t = Date.now();
    const a = ask(s, 'Bash', 'make deploy', t);
    const b = ask(s, 'Write', 'notes.txt', t + 1);
    const list = await getJson(`${s.url}/api/approvals`);
    expect(list.status).toBe(200);
    expect((list.body.pending as Array<{ code: string }>).map((r) => r.code)).toEqual([a.code, b.code]);
    expect(list.body.decided).toEqual([]);
    // The input's JSON stays in the database; the page gets the line.
    expect(list.body.pending).toContainEqual(
      expect.objectContaining({ tool: 'Bash', input_line: 'make deploy', input: 'make deploy' }),
    );
    expect(JSON.stringify(list.body)).not.toContain('input_json');

    const bearer = { Authorization: `Bearer ${TOKEN}` };
    expect((await postJson(`${s.url}/api/approvals/${a.code}/approve`, {})).status).toBe(401);
    expect(
      (await postJson(`${s.url}/api/approvals/${a.code}/approve`, {}, { Authorization: 'Bearer nope' }))
        .status,
    ).toBe(401);
    expect((await postJson(`${s.url}/api/approvals/ZZZZZ/approve`, {}, bearer)).status).toBe(404);
    const ok = await postJson(`${s.url}/api/approvals/${a.code.toLowerCase()}/approve`, {}, bearer);
    expect(ok.status).toBe(200);
    expect(ok.body.approval).toMatchObject({ state: 'approved', decided_by: 'dashboard:admin-token' });
    const again = await postJson(`${s.url}/api/approvals/${a.code}/reject`, {}, bearer);
    expect(again).toEqual({ status: 409, body: { error: `${a.code} was already decided (approved)` } });
    const no = await postJson(`${s.url}/api/approvals/${b.code}/reject`, { note: ' wrong file ' }, bearer);
    expect(no.body.approval).toMatchObject({ state: 'rejected', note: 'wrong file' });

    const after = await getJson(`${s.url}/api/approvals`);
    expect(after.body.pending).toEqual([]);
    expect(
      (after.body.decided as Array<{ code: string; state: string }>).map((r) => [r.code, r.state]),
    ).toEqual([
      [b.code, 'rejected'],
      [a.code, 'approved'],
    ]);
    const actors = s.db
      .prepare(`SELECT actor FROM audit WHERE subject = 'tool_approvals' AND action = 'update'`)
      .pluck()
      .all();
    expect(actors).toEqual(['dashboard:admin-token', 'dashboard:admin-token']);
  });

  it('without GATED_ADMIN_TOKEN nothing is decided here, even locally', async () => {
    const s = await startWebServer();
    const a = ask(s, 'Bash', 'ls', Date.now());
    expect((await postJson(`${s.url}/api/approvals/${a.code}/approve`, {})).status).toBe(403);
    expect(toolApprovalsOf(s.db).byCode(a.code)?.state).toBe('pending');
  });
});
