/**
 * The audit trail (docs/SECURITY.md, docs/ACCESS.md "Audit") against a real SQLite file, with edits made by a
 * plain second connection as sqlite3 makes them (no gated code on it): every column of registered_groups,
 * daemons and tasks, INSERT OR REPLACE with the state before, deletes of audit rows, and actors that an
 * `audit_actor` row written from outside cannot spoof (a tool decision's included).
 */
import Database from 'better-sqlite3';
import { expect, test } from 'vitest';
import { listAudit, withActor, type AuditRow } from '../../store/audit.js';
import { AUDITED_TABLES } from '../../store/audit-triggers.js';
import { addGroup } from '../../store/groups.js';
import { freshDb, tempDir } from '../helpers/db.js';

/** A connection as the sqlite3 shell opens one: no schema applied, no gated statement, no actor. */
function rawSql(path: string): Database.Database {
  return new Database(path);
}

const last = (db: Database.Database): AuditRow =>
  db.prepare(`SELECT * FROM audit ORDER BY id DESC LIMIT 1`).get() as AuditRow;
const parse = (s: string | null) => (s === null ? null : (JSON.parse(s) as Record<string, unknown>));

test('every column of registered_groups changed with raw SQL is in before and after, actor sql', () => {
  const { db, path } = freshDb();
  addGroup(db, tempDir(), 'club', 'Club');
  const raw = rawSql(path);
  const columns = (
    raw.pragma('table_info(registered_groups)') as Array<{ name: string; type: string }>
  ).filter((c) => c.name !== 'folder');
  expect(columns.map((c) => c.name)).toEqual(expect.arrayContaining(['send_allow', 'actions', 'placement']));
  for (const c of columns) {
    const before = raw
      .prepare(`SELECT "${c.name}" FROM registered_groups WHERE folder = 'club'`)
      .pluck()
      .get();
    const value = /int/i.test(c.type) ? 7 : `changed ${c.name}`;
    raw.prepare(`UPDATE registered_groups SET "${c.name}" = ? WHERE folder = 'club'`).run(value);
    const row = last(raw);
    expect([c.name, row.subject, row.action, row.actor, row.row_key]).toEqual([
      c.name,
      'registered_groups',
      'update',
      'sql',
      'club',
    ]);
    expect([c.name, parse(row.before)![c.name]]).toEqual([c.name, before]);
    expect([c.name, parse(row.after)![c.name]]).toEqual([c.name, value]);
  }
  raw.close();
});

test('INSERT OR REPLACE keeps the replaced row; daemons, tasks and the listed tables are audited', () => {
  const { db, path } = freshDb();
  const raw = rawSql(path);
  raw.prepare(`INSERT INTO daemons (name, url) VALUES ('d', 'http://127.0.0.1:1/a')`).run();
  raw.prepare(`INSERT OR REPLACE INTO daemons (name, url) VALUES ('d', 'http://127.0.0.1:1/b')`).run();
  const r = last(raw);
  expect([r.subject, r.action, r.row_key]).toEqual(['daemons', 'replace', 'd']);
  expect(parse(r.before)).toMatchObject({ name: 'd', url: 'http://127.0.0.1:1/a' });
  expect(parse(r.after)).toMatchObject({ name: 'd', url: 'http://127.0.0.1:1/b' });
  // A replace through a unique constraint other than the key (members' group and sender).
  raw.prepare(`INSERT INTO members (group_folder, sender, role) VALUES ('g', 'telegram:1', 'member')`).run();
  raw
    .prepare(
      `INSERT OR REPLACE INTO members (group_folder, sender, role) VALUES ('g', 'telegram:1', 'owner')`,
    )
    .run();
  const m = last(raw);
  expect([m.subject, m.action]).toEqual(['members', 'replace']);
  expect([parse(m.before)!.role, parse(m.after)!.role]).toEqual(['member', 'owner']);
  // An upsert is one update, not a replace.
  raw
    .prepare(
      `INSERT INTO members (group_folder, sender, role) VALUES ('g', 'telegram:1', 'blocked')
       ON CONFLICT (group_folder, sender) DO UPDATE SET role = excluded.role`,
    )
    .run();
  expect(last(raw)).toMatchObject({ subject: 'members', action: 'update' });
  raw
    .prepare(
      `INSERT INTO tasks (group_folder, chat_jid, kind, spec, text, anchor_at)
       VALUES ('g', 'local:g', 'every', '1h', 'x', '2026-11-25T10:00:00.000Z')`,
    )
    .run();
  expect(last(raw)).toMatchObject({ subject: 'tasks', action: 'insert', before: null });
  const triggers = raw.prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger'`).pluck().all();
  for (const table of Object.keys(AUDITED_TABLES)) {
    for (const op of ['insert', 'update', 'delete', 'replaced'])
      expect(triggers).toContain(`audit_${table}_${op}`);
  }
  raw.close();
  db.close();
});

test('deleting or changing audit rows is itself recorded', () => {
  const { path } = freshDb();
  const raw = rawSql(path);
  raw.prepare(`INSERT INTO daemons (name, url) VALUES ('d', 'http://127.0.0.1:1/a')`).run();
  const evidence = last(raw);
  raw.prepare(`DELETE FROM audit`).run();
  const trail = raw.prepare(`SELECT * FROM audit`).all() as AuditRow[];
  expect(trail).toHaveLength(1);
  expect(trail[0]).toMatchObject({
    subject: 'audit',
    action: 'delete',
    actor: 'sql',
    row_key: String(evidence.id),
  });
  expect(parse(trail[0]!.before)).toMatchObject({ subject: 'daemons', action: 'insert', actor: 'sql' });
  raw.prepare(`UPDATE audit SET actor = 'someone'`).run();
  expect(last(raw)).toMatchObject({ subject: 'audit', action: 'update', actor: 'sql' });
  raw.close();
});

test('actors: gated names its own changes; an audit_actor row written with sqlite3 names nothing', () => {
  const { db, path } = freshDb();
  const raw = rawSql(path);
  raw.prepare(`INSERT INTO router_state (key, value) VALUES ('audit_actor', 'cli:boss')`).run();
  raw.prepare(`INSERT INTO daemons (name, url) VALUES ('spoof', 'http://127.0.0.1:1/a')`).run();
  expect(last(raw)).toMatchObject({ subject: 'daemons', actor: 'sql' });
  withActor(db, 'dashboard', () => db.prepare(`DELETE FROM daemons WHERE name = 'spoof'`).run());
  expect(last(raw)).toMatchObject({ subject: 'daemons', action: 'delete', actor: 'dashboard' });
  // The planted row is gone after gated's change, and the next raw edit is still 'sql'.
  expect(raw.prepare(`SELECT count(*) FROM router_state WHERE key = 'audit_actor'`).pluck().get()).toBe(0);
  raw.prepare(`INSERT INTO daemons (name, url) VALUES ('later', 'http://127.0.0.1:1/b')`).run();
  expect(last(raw)).toMatchObject({ actor: 'sql' });
  // Nested actors restore the outer one; a change outside withActor on gated's connection is gated's own.
  withActor(db, 'cli:ada', () => {
    withActor(db, 'chat:telegram:1', () => db.prepare(`UPDATE daemons SET url = 'http://x/1'`).run());
    db.prepare(`UPDATE daemons SET url = 'http://x/2'`).run();
  });
  db.prepare(`UPDATE daemons SET url = 'http://x/3'`).run();
  expect(listAudit(db, { limit: 3 }).map((r) => r.actor)).toEqual(['gated', 'cli:ada', 'chat:telegram:1']);
  // After withActor, gated's connection is still its own, and a raw one still 'sql'.
  db.prepare(`UPDATE daemons SET url = 'http://x/4'`).run();
  expect(last(raw)).toMatchObject({ actor: 'gated' });
  raw.prepare(`UPDATE daemons SET url = 'http://x/5'`).run();
  expect(last(raw)).toMatchObject({ actor: 'sql' });
  raw.close();
});

test('gated’s own writes to tasks are audited as gated; an update that changes nothing leaves no row', () => {
  const { db, path } = freshDb();
  const raw = rawSql(path);
  const id = db
    .prepare(
      `INSERT INTO tasks (group_folder, chat_jid, kind, spec, text, next_run_at, anchor_at)
       VALUES ('g', 'web:g', 'every', '1h', 'tick', '2026-01-01T01:00:00Z', '2026-01-01T00:00:00Z')`,
    )
    .run().lastInsertRowid;
  // What the task loop does when one fires: gated's own change, named so.
  db.prepare(`UPDATE tasks SET last_run_at = next_run_at, next_run_at = '2026-01-01T02:00:00Z'`).run();
  expect(last(raw)).toMatchObject({
    subject: 'tasks',
    action: 'update',
    actor: 'gated',
    row_key: String(id),
  });
  const count = () => raw.prepare(`SELECT count(*) FROM audit`).pluck().get() as number;
  const before = count();
  // Every column set to what it holds: no change, no row, from gated's connection and a raw one alike.
  db.prepare(`UPDATE tasks SET failures = failures, next_run_at = next_run_at`).run();
  raw.prepare(`UPDATE tasks SET next_run_at = '2026-01-01T02:00:00Z', error = NULL`).run();
  expect(count()).toBe(before);
  // A NULL that gets a value is a change (IS NOT, not !=), and so is a value that becomes NULL.
  raw.prepare(`UPDATE tasks SET error = 'paused by hand'`).run();
  raw.prepare(`UPDATE tasks SET error = NULL`).run();
  expect(count()).toBe(before + 2);
  expect(last(raw)).toMatchObject({ actor: 'sql', action: 'update' });
  raw.close();
});

test('a tool decision written with sqlite3 is recorded as sql, whatever audit_actor row it planted', () => {
  const { db, path } = freshDb();
  const raw = rawSql(path);
  db.prepare(
    `INSERT INTO tool_approvals (code, group_folder, chat_jid, tool, input_json, input_line, created_at, expires_at)
     VALUES ('K7QXM', 'ops', 'telegram:-1', 'Bash', '{}', 'make deploy', 0, 1)`,
  ).run();
  expect(last(raw)).toMatchObject({ subject: 'tool_approvals', action: 'insert', actor: 'gated' });
  // The question's name for a decision made in a chat is `chat:<platform>:<id>`: a raw session claims one.
  raw.prepare(`INSERT INTO router_state (key, value) VALUES ('audit_actor', 'chat:telegram:42')`).run();
  raw
    .prepare(`UPDATE tool_approvals SET state = 'approved', decided_by = 'telegram:42' WHERE code = 'K7QXM'`)
    .run();
  expect(last(raw)).toMatchObject({ subject: 'tool_approvals', action: 'update', actor: 'sql' });
  expect(parse(last(raw).after)).toMatchObject({ state: 'approved', decided_by: 'telegram:42' });
  // The same decision through gated names its decider.
  withActor(db, 'chat:telegram:7', () =>
    db.prepare(`UPDATE tool_approvals SET state = 'rejected' WHERE code = 'K7QXM'`).run(),
  );
  expect(last(raw)).toMatchObject({ subject: 'tool_approvals', actor: 'chat:telegram:7' });
  raw.close();
});
