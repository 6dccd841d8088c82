import { execFileSync } from 'node:child_process';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDatabase } from '../../store/db.js';
import { addGroup } from '../../store/groups.js';
import { insertInbound } from '../../store/messages.js';
import { gatedCli as gated } from '../helpers/cli.js';
import { tempDir } from '../helpers/db.js';
import { testGateway } from '../helpers/gateway.js';

/** A database with group `club` that every telegram chat routes to, and a gateway (ticked by hand). */
function setup() {
  const dir = tempDir();
  const path = join(dir, 'gated.db');
  const db = openDatabase(path);
  addGroup(db, join(dir, 'groups'), 'club');
  db.prepare(`INSERT INTO routes (seq, match, target) VALUES (0, 'platform=telegram', 'club')`).run();
  const { gateway } = testGateway(db);
  const send = (content: string, sender: string, chat = 'telegram:-100') => {
    const id = insertInbound(db, { chat_jid: chat, sender, content })!;
    gateway.loop.tick();
    return id;
  };
  const state = (id: number) => db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(id);
  return { path, db, gateway, send, state };
}

describe('gated access and gated audit', () => {
  it('an edit made with sqlite3 appears in the audit next to the CLI user’s own changes', async () => {
    const { path, db } = setup();
    expect(await gated(path, 'access', 'mode', 'club', 'members')).toMatchObject({ code: 0 });
    expect(await gated(path, 'access', 'add', 'club', 'telegram:42', '--role', 'owner')).toMatchObject({
      code: 0,
    });
    execFileSync('sqlite3', [path], {
      input: `INSERT INTO members (group_folder, sender, role) VALUES ('club', 'telegram:*', 'member');
              UPDATE routes SET seq = 7 WHERE target = 'club';`,
    });
    const { code, out } = await gated(path, 'audit', '--since', '1h');
    expect(code).toBe(0);
    const lines = out.trim().split('\n');
    expect(lines[0]).toBe('id\tat\tactor\twhat\tkey\tbefore\tafter');
    const me = `cli:${userInfo().username}`;
    expect(lines[1]).toMatch(/^\d+\t\S+\tsql\troutes\.update\t\d+\t\{.*"seq":0.*\}\t\{.*"seq":7.*\}$/);
    expect(lines[2]).toMatch(
      // The row's columns in name order (store/audit-triggers.ts).
      /^\d+\t\S+\tsql\tmembers\.insert\t\d+\t\t\{.*"role":"member".*"sender":"telegram:\*"/,
    );
    expect(lines[3]).toContain(`\t${me}\tmembers.insert\t`);
    expect(lines[4]).toMatch(
      new RegExp(`\\t${me}\\tregistered_groups\\.update\\tclub\\t.*"access":"open".*"access":"members"`),
    );
    // The actor never outlives the writer's transaction.
    expect(db.prepare(`SELECT count(*) FROM router_state WHERE key = 'audit_actor'`).pluck().get()).toBe(0);
    expect((await gated(path, 'audit', '--since', '2999-01-01')).out.trim().split('\n')).toHaveLength(1);
  });

  it('routes, groups and tasks changed from the CLI are audited under the CLI user, not as sql', async () => {
    const { db, path } = setup();
    const me = `cli:${userInfo().username}`;
    const ok = async (...args: string[]) => expect((await gated(path, ...args)).code).toBe(0);
    const from = db.prepare(`SELECT coalesce(max(id), 0) FROM audit`).pluck().get() as number;
    await ok('routes', 'add', 'club', '--seq', '5', '--match', 'platform=discord');
    await ok('groups', 'add', 'lab');
    await ok('groups', 'agent', 'lab', 'codex', 'gpt-test');
    await ok('groups', 'threads', 'lab', 'replies');
    await ok('tasks', 'add', '--group', 'lab', '--chat', 'web:lab', '--every', '1h', 'hello');
    const task = db.prepare(`SELECT id FROM tasks`).pluck().get() as number;
    await ok('tasks', 'pause', String(task));
    await ok('tasks', 'resume', String(task));
    await ok('tasks', 'rm', String(task));
    const route = db.prepare(`SELECT id FROM routes WHERE seq = 5`).pluck().get() as number;
    await ok('routes', 'rm', String(route));
    await ok('groups', 'rm', 'lab');
    const rows = db
      .prepare(`SELECT actor, subject || '.' || action AS what FROM audit WHERE id > ? ORDER BY id`)
      .all(from) as { actor: string; what: string }[];
    const whats = rows.map((r) => r.what);
    for (const w of [
      'routes.insert',
      'routes.delete',
      'registered_groups.insert',
      'registered_groups.update',
      'registered_groups.delete',
      'tasks.insert',
      'tasks.update',
      'tasks.delete',
    ])
      expect(whats).toContain(w);
    expect(rows.filter((r) => r.actor !== me)).toEqual([]);
  });

  it('bad input gets one line naming the problem and exit 2', async () => {
    const { path } = setup();
    for (const [args, why] of [
      [['access', 'add', 'club', 'nocolon'], /write platform:sender_id/],
      [['access', 'add', 'club', 'telegram:[x'], /bad sender glob/],
      [['access', 'add', 'club', 'telegram:1', '--role', 'king'], /bad role 'king'/],
      [['access', 'mode', 'club', 'closed'], /bad access mode 'closed'/],
      [['access', 'mode', 'nope', 'members'], /no group 'nope'/],
      [['access', 'rm', 'club', 'telegram:1'], /no member row/],
      [['access', 'limit', 'club', '--runs-per-day', 'lots'], /--runs-per-day must be a whole number/],
      [['access', 'approve', 'ABCDEFGH'], /not approved: no pairing code ABCDEFGH/],
      [['access', 'reject', 'short'], /not rejected: 'short' is not a pairing code/],
      [['audit', '--since', 'yesterday'], /--since must be an ISO date/],
    ] as const) {
      const r = await gated(path, ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err.trim().split('\n'), args.join(' ')).toHaveLength(1);
      expect(r.err, args.join(' ')).toMatch(why);
    }
  });

  it('approve from the CLI releases the stranger’s pending messages; list shows the decisions', async () => {
    const { path, db, send, state, gateway } = setup();
    await gated(path, 'access', 'mode', 'club', 'approval');
    const a = send('hello', 'stranger');
    const b = send('anyone?', 'stranger');
    expect([state(a), state(b)]).toEqual(['pending', 'pending']);
    const code = db.prepare(`SELECT code FROM approvals`).pluck().get() as string;
    const listed = await gated(path, 'access', 'list');
    expect(listed.out).toMatch(
      /^club\tapproval\t-\tnone\t0 runs, \$0\.00 today\tserved 0, denied 0, pending 2, limited 0; codes approved 0, rejected 0, open 1$/m,
    );
    expect(listed.out).toMatch(new RegExp(`^\\t${code}\\tclub\\ttelegram:stranger\\ttelegram:-100\\t`, 'm'));

    const ok = await gated(path, 'access', 'approve', code.toLowerCase());
    expect(ok).toMatchObject({ code: 0 });
    expect(ok.out).toMatch(/approved telegram:stranger as a member of club .*2 messages released/);
    gateway.loop.tick();
    expect([state(a), state(b)]).toEqual(['ready', 'ready']);
    expect((await gated(path, 'access', 'approve', code)).err).toMatch(/already approved/);
    const after = await gated(path, 'access', 'list', '--group', 'club');
    expect(after.out).toMatch(/served 2, denied 0, pending 0, limited 0; codes approved 1/);
    expect(after.out).toMatch(/^\t\d+\tclub\ttelegram:stranger\tmember\tapproved with code/m);
    gateway.stop();
  });

  it('limit from the CLI, then release re-queues the limited rows of the chat', async () => {
    const { path, send, state, gateway } = setup();
    expect((await gated(path, 'access', 'limit', 'club', '--sender-per-hour', '1')).out).toMatch(
      /club: sender\/hour 1, runs\/day none, cost\/day none/,
    );
    const a = send('one', 'x');
    const b = send('two', 'x');
    expect([state(a), state(b)]).toEqual(['ready', 'limited']);
    expect((await gated(path, 'access', 'release', 'telegram:-100')).out).toMatch(
      /1 message of telegram:-100 released/,
    );
    gateway.loop.tick();
    expect(state(b)).toBe('ready');
    expect((await gated(path, 'access', 'limit', 'club', '--sender-per-hour', 'none')).out).toMatch(
      /sender\/hour none/,
    );
    expect(state(send('three', 'x'))).toBe('ready');
    gateway.stop();
  });
});
