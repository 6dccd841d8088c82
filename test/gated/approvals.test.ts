import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { upsertMember } from '../../store/access.js';
import { addGroup } from '../../store/groups.js';
import { startTestGated } from '../helpers/gated.js';
import { until } from '../helpers/process.js';

/**
 * Tool approvals end to end (docs/APPROVALS.md): a whole gated on the process runtime with the example
 * agent's `!tool` mode, which asks before each tool call, waits for its permission line and records the
 * calls it ran in `.tool-runs.log`. The chat has no buttons here (no channel started for telegram:), so the
 * question is a plain message and decisions are typed.
 */

async function start(env: Record<string, string> = {}) {
  const g = await startTestGated({
    channels: [],
    http: false,
    env: { GATED_IDLE_TIMEOUT_MS: '300', GATED_POLL_MS: '100', ...env },
  });
  const config = g.config;
  addGroup(g.db, config.groupsDir, 'ops');
  g.db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'ops')`).run();
  upsertMember(g.db, 'ops', 'telegram:owner', 'owner');
  upsertMember(g.db, 'ops', 'telegram:bob', 'member');
  const rule = (seq: number, tool: string, input: string, decision: string, approvers = 'owners') =>
    Number(
      g.db
        .prepare(
          `INSERT INTO tool_rules (group_folder, seq, tool, input, decision, approvers) VALUES ('ops', ?, ?, ?, ?, ?)`,
        )
        .run(seq, tool, input, decision, approvers).lastInsertRowid,
    );
  const replies = (chat: string) =>
    g.db
      .prepare(`SELECT content FROM messages WHERE is_from_me = 1 AND chat_jid = ? ORDER BY id`)
      .pluck()
      .all(chat) as string[];
  const state = (id: number) => g.db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id);
  const runsLog = join(config.groupsDir, 'ops', '.tool-runs.log');
  const ran = () =>
    existsSync(runsLog) ? readFileSync(runsLog, 'utf8').trim().split('\n').filter(Boolean) : [];
  const send = (chat: string, sender: string, content: string) =>
    g.gateway.sink({ chat_jid: chat, sender, content })!;
  return { g, rule, replies, state, ran, send };
}

describe('tool approvals with the example agent', () => {
  it('an allow rule runs the tool without asking; a deny rule refuses it with the rule named', async () => {
    const { g, rule, replies, state, ran, send } = await start();
    rule(1, 'Bash', 'ls *', 'allow');
    const deny = rule(2, 'Bash', 'rm *', 'deny');
    const a = send('telegram:-1', 'bob', '!tool Bash ls /tmp');
    await until(() => state(a) === 'done', 15_000, 'the allowed call answered');
    const b = send('telegram:-1', 'bob', '!tool Bash rm -rf /tmp/x');
    await until(() => state(b) === 'done', 15_000, 'the denied call answered');
    const out = replies('telegram:-1').join('\n');
    expect(out).toContain('tool Bash ran: {"command":"ls /tmp"}');
    expect(out).toContain(`tool Bash denied: denied by tool rule ${deny}`);
    expect(ran()).toEqual(['Bash {"command":"ls /tmp"}']);
    expect(g.db.prepare('SELECT count(*) FROM tool_approvals').pluck().get()).toBe(0);
  }, 60_000);

  it('ask: one message with the code; a member who is not an approver is refused; the owner rejects with a note the agent receives, then approves another', async () => {
    const { g, rule, replies, state, ran, send } = await start();
    rule(1, 'Bash', '*', 'ask');
    const chat = 'telegram:-5';
    const m = send(chat, 'bob', '!tool Bash make deploy');
    const asked = await until(
      () => replies(chat).find((r) => r.includes('/approve ')),
      15_000,
      'the question',
    );
    expect(asked).toContain('The agent wants to run Bash');
    const code = /\/approve ([A-Z0-9]{5})/.exec(asked)![1]!;
    const row = g.db.prepare('SELECT * FROM tool_approvals WHERE code = ?').get(code) as Record<
      string,
      unknown
    >;
    expect(row).toMatchObject({ state: 'pending', tool: 'Bash', input_line: 'make deploy', chat_jid: chat });
    expect(JSON.parse(String(row.turn_rows))).toEqual([m]);

    send(chat, 'bob', `/approve ${code}`);
    await until(() => replies(chat).some((r) => r.startsWith('you may not approve')), 10_000, 'the refusal');
    expect(state(m)).toBe('running');

    send('telegram:99', 'owner', `/reject ${code} not on a Friday`);
    await until(() => state(m) === 'done', 15_000, 'the rejected call answered');
    expect(replies(chat).join('\n')).toContain('tool Bash denied: not on a Friday');
    expect(ran()).toEqual([]);
    await until(() => replies(chat).some((r) => r.includes(`rejected by telegram:owner`)), 10_000, 'told');
    expect(replies(chat).filter((r) => r.includes('/approve ')).length).toBe(1);

    const n = send(chat, 'bob', '!tool Bash make test');
    const second = await until(
      () => replies(chat).filter((r) => r.includes('/approve '))[1],
      15_000,
      'the second question',
    );
    const code2 = /\/approve ([A-Z0-9]{5})/.exec(second)![1]!;
    send('telegram:99', 'owner', `/approve ${code2}`);
    await until(() => state(n) === 'done', 15_000, 'the approved call answered');
    expect(ran()).toEqual(['Bash {"command":"make test"}']);
    const audit = g.db
      .prepare(`SELECT actor, action FROM audit WHERE subject = 'tool_approvals' ORDER BY id`)
      .all();
    expect(audit).toEqual([
      { actor: 'gated', action: 'insert' },
      { actor: 'chat:telegram:owner', action: 'update' },
      { actor: 'gated', action: 'insert' },
      { actor: 'chat:telegram:owner', action: 'update' },
    ]);
  }, 60_000);

  it('expiry denies with "no decision"; the wait does not count toward the hard timeout', async () => {
    // The approval waits 7 s, longer than the whole run may take (4 s): the run is not killed.
    const { g, rule, replies, state, ran, send } = await start({
      GATED_APPROVAL_TIMEOUT_MS: '7000',
      GATED_RUN_TIMEOUT_MS: '4000',
    });
    rule(1, '*', '*', 'ask');
    const chat = 'telegram:-9';
    const m = send(chat, 'bob', '!tool Write {"file_path":"notes.txt"}');
    await until(() => state(m) === 'done', 40_000, 'the expired call answered');
    expect(replies(chat).join('\n')).toContain('tool Write denied: no decision');
    expect(replies(chat).join('\n')).toContain('not decided in time');
    expect(ran()).toEqual([]);
    const log = g.db.prepare('SELECT result FROM session_log ORDER BY id DESC LIMIT 1').pluck().get();
    expect(log).not.toBe('timeout');
    const row = g.db.prepare('SELECT state, input_line, used_at FROM tool_approvals').get() as Record<
      string,
      unknown
    >;
    expect(row).toMatchObject({ state: 'expired', input_line: 'notes.txt' });
    expect(row.used_at).not.toBeNull();
  }, 60_000);
});
