import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { packageFile } from '../../core/paths.js';
import { installAuditTriggers } from '../../store/audit-triggers.js';
import { openDatabase, SCHEMA_VERSION } from '../../store/db.js';
import { QueueStore } from '../../store/queue.js';
import { tempDir } from '../helpers/db.js';
import { exited, gatedEnv, gatedRun, stderrOf } from '../helpers/process.js';

/**
 * The first released schema (schema.sql of the project's first commit, version 1), kept verbatim in
 * fixtures/: the oldest database an operator can hold.
 */
const FIRST_SCHEMA = readFileSync(packageFile('test', 'store', 'fixtures', 'schema-v1.sql'), 'utf8');

/**
 * A database's shape: each table's columns (name, type, not null, default, key) as a set, since an added
 * column lands at the end; every index and trigger by its SQL (CREATE … IF NOT EXISTS never rewrites one).
 */
function shape(db: Database.Database): Record<string, string> {
  const out: Record<string, string> = {};
  const objects = db
    .prepare(`SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name`)
    .all() as { type: string; name: string; sql: string | null }[];
  for (const o of objects) {
    if (o.type !== 'table') out[`${o.type} ${o.name}`] = (o.sql ?? '').replace(/\s+/g, ' ');
    else {
      const cols = db.pragma(`table_info(${o.name})`) as Record<string, unknown>[];
      out[`table ${o.name}`] = cols
        .map(
          (c) =>
            `${String(c.name)} ${String(c.type)} ${String(c.notnull)} ${String(c.dflt_value)} ${String(c.pk)}`,
        )
        .sort()
        .join(', ');
    }
  }
  return out;
}

describe('upgrading from the oldest schema', { timeout: 60_000 }, () => {
  it('a version-1 database becomes the newest schema, shaped as a fresh one, with its rows kept and working', () => {
    const dir = tempDir();
    const path = join(dir, 'old.db');
    const old = new Database(path);
    old.exec(FIRST_SCHEMA);
    old.pragma('user_version = 1');
    old.exec(`
      INSERT INTO registered_groups (folder, name) VALUES ('club', 'The club');
      INSERT INTO registered_groups (folder, name, network) VALUES ('online', 'On the net', 1);
      INSERT INTO routes (seq, match, target) VALUES (10, 'platform=telegram', 'club');
      INSERT INTO sessions (group_folder, topic, session_id) VALUES ('club', '', 'sess-1');
      INSERT INTO session_log (group_folder, chat_jid, result, replies) VALUES ('club', 'telegram:1', 'ok', 1);
      INSERT INTO messages (chat_jid, sender, content, state, group_folder, session_topic)
        VALUES ('telegram:1', 'ann', 'hello from version 1', 'done', 'club', '');
      INSERT INTO messages (chat_jid, sender, content, state, group_folder, session_topic, ready_at)
        VALUES ('telegram:1', 'bob', 'still waiting', 'ready', 'club', '', 1);
      INSERT INTO messages (chat_jid, content, is_from_me, delivery, kind, reply_to_id)
        VALUES ('telegram:1', 'an answer', 1, 'pending', 'reply', 1);
      INSERT INTO chat_state (chat_jid, sticky_group) VALUES ('telegram:1', 'club');`);
    old.close();

    const db = openDatabase(path);
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    const fresh = openDatabase(join(dir, 'fresh.db'));
    expect(shape(db)).toEqual(shape(fresh));
    fresh.close();

    // The old network switch (13): on is the runtime's former fixed 'bridge', off is none.
    expect(
      db.prepare(`SELECT folder, name, access, network FROM registered_groups ORDER BY folder`).all(),
    ).toEqual([
      { folder: 'club', name: 'The club', access: 'open', network: null },
      { folder: 'online', name: 'On the net', access: 'open', network: 'bridge' },
    ]);
    expect(db.prepare(`SELECT seq, match, target FROM routes`).all()).toEqual([
      { seq: 10, match: 'platform=telegram', target: 'club' },
    ]);
    expect(db.prepare(`SELECT session_id FROM sessions`).pluck().all()).toEqual(['sess-1']);
    expect(db.prepare(`SELECT sticky_group FROM chat_state`).pluck().all()).toEqual(['club']);
    expect(db.prepare(`SELECT id, content, state, delivery FROM messages ORDER BY id`).all()).toEqual([
      { id: 1, content: 'hello from version 1', state: 'done', delivery: null },
      { id: 2, content: 'still waiting', state: 'ready', delivery: null },
      { id: 3, content: 'an answer', state: null, delivery: 'pending' },
    ]);
    // The old rows go through today's statements: the waiting one is handed to a run, which stamps it.
    const before = Date.now();
    expect(new QueueStore(db).dispatch({ group: 'club', topic: '' }, before)?.rows.map((r) => r.id)).toEqual([
      2,
    ]);
    const at = db.prepare(`SELECT dispatched_at FROM messages WHERE id = 2`).pluck().get() as number;
    expect(at).toBeGreaterThanOrEqual(before - 1);
    expect(at).toBeLessThanOrEqual(Date.now() + 1);
    db.close();
  });

  it('12 → 13: the network switch becomes a name under live audit triggers, and the change is audited', () => {
    const dir = tempDir();
    const path = join(dir, 'v12.db');
    // A version-12 database: today's schema with the integer switch back, and the audit triggers of then.
    const v12 = openDatabase(path);
    v12.exec(`
      DROP TRIGGER audit_registered_groups_replaced; DROP TRIGGER audit_registered_groups_insert;
      DROP TRIGGER audit_registered_groups_update; DROP TRIGGER audit_registered_groups_delete;
      ALTER TABLE registered_groups DROP COLUMN network;
      ALTER TABLE registered_groups ADD COLUMN network INTEGER NOT NULL DEFAULT 0;`);
    installAuditTriggers(v12);
    v12.exec(`INSERT INTO registered_groups (folder, network) VALUES ('online', 1), ('offline', 0)`);
    v12.pragma('user_version = 12');
    v12.close();

    const db = openDatabase(path);
    expect(db.prepare(`SELECT folder, network FROM registered_groups ORDER BY folder`).all()).toEqual([
      { folder: 'offline', network: null },
      { folder: 'online', network: 'bridge' },
    ]);
    const fresh = openDatabase(join(dir, 'fresh.db'));
    expect(shape(db)).toEqual(shape(fresh));
    fresh.close();
    // The triggers were made again from the new columns: a change names the network in the audit.
    db.prepare(`UPDATE registered_groups SET network = 'agents' WHERE folder = 'online'`).run();
    const after = db.prepare(`SELECT after FROM audit ORDER BY id DESC LIMIT 1`).pluck().get() as string;
    expect(JSON.parse(after)).toMatchObject({ folder: 'online', network: 'agents' });
    db.close();
  });
});

describe('13 → 14', { timeout: 60_000 }, () => {
  it('the trigger that stamped dispatched_at is dropped; the dispatching UPDATE stamps the row once', () => {
    const dir = tempDir();
    const path = join(dir, 'v13.db');
    const v13 = openDatabase(path);
    v13.exec(`
      CREATE TRIGGER messages_dispatched AFTER UPDATE OF state ON messages
        WHEN NEW.state = 'running' AND OLD.state IS NOT 'running'
      BEGIN
        UPDATE messages SET dispatched_at = 1 WHERE id = NEW.id;
      END;
      INSERT INTO messages (chat_jid, sender, content, state, group_folder, session_topic, ready_at)
        VALUES ('web:club', 'ann', 'waiting', 'ready', 'club', '', 1);`);
    v13.pragma('user_version = 13');
    v13.close();

    const db = openDatabase(path);
    const fresh = openDatabase(join(dir, 'fresh.db'));
    expect(shape(db)).toEqual(shape(fresh));
    fresh.close();
    const triggers = db
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'messages'`)
      .pluck()
      .all();
    expect(triggers).toEqual([]);
    const before = Date.now();
    new QueueStore(db).dispatch({ group: 'club', topic: '' }, before);
    const row = db.prepare(`SELECT state, dispatched_at FROM messages WHERE id = 1`).get() as {
      state: string;
      dispatched_at: number;
    };
    // The old trigger would have written 1; the UPDATE writes the time of the dispatch.
    expect(row.state).toBe('running');
    expect(row.dispatched_at).toBeGreaterThanOrEqual(before - 1);
    db.close();
  });
});

describe('15 → 16', { timeout: 60_000 }, () => {
  it('the backoff index of every ready row gives way to one of the rows that wait; retries are still found', () => {
    const dir = tempDir();
    const path = join(dir, 'v15.db');
    const v15 = openDatabase(path);
    v15.exec(`
      DROP INDEX idx_messages_backoff;
      CREATE INDEX idx_messages_retry ON messages(not_before) WHERE state = 'ready';
      INSERT INTO messages (chat_jid, sender, content, state, group_folder, session_topic, ready_at, not_before)
        VALUES ('web:club', 'ann', 'waits', 'ready', 'club', '', 1, 5000),
               ('web:club', 'bob', 'goes', 'ready', 'club', '', 1, NULL);`);
    v15.pragma('user_version = 15');
    v15.close();

    const db = openDatabase(path);
    const fresh = openDatabase(join(dir, 'fresh.db'));
    expect(shape(db)).toEqual(shape(fresh));
    fresh.close();
    const indexes = db
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND name IN (?, ?)`)
      .pluck()
      .all('idx_messages_retry', 'idx_messages_backoff');
    expect(indexes).toEqual(['idx_messages_backoff']);
    // Only the row in its backoff is in the index; the retry timer still finds it.
    expect(
      db
        .prepare(
          `SELECT count(*) FROM messages INDEXED BY idx_messages_backoff WHERE state = 'ready' AND not_before > 0`,
        )
        .pluck()
        .get(),
    ).toBe(1);
    const store = new QueueStore(db);
    expect(store.nextRetry(1000)).toBe(5000);
    expect(store.nextRetry(5000)).toBeNull();
    db.close();
  });
});

describe('16 → 17', { timeout: 60_000 }, () => {
  it('rows count toward a sender limit only in limited groups: this hour of those is marked, the index shrinks', () => {
    const dir = tempDir();
    const path = join(dir, 'v16.db');
    const v16 = openDatabase(path);
    const old = new Date(Date.now() - 2 * 3_600_000).toISOString();
    const hourOf = () => Math.floor(Date.now() / 3_600_000);
    const insertedIn = hourOf();
    v16.exec(`
      DROP INDEX idx_messages_sender_counted;
      ALTER TABLE messages DROP COLUMN counted;
      CREATE INDEX idx_messages_sender_hour
        ON messages(group_folder, sender, timestamp, chat_jid) WHERE group_folder IS NOT NULL;
      INSERT INTO limits (group_folder, sender_per_hour) VALUES ('club', 5);
      INSERT INTO messages (chat_jid, sender, content, state, group_folder, timestamp)
        VALUES ('web:club', 'ann', 'now', 'done', 'club', strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
               ('web:club', 'ann', 'earlier', 'done', 'club', '${old}'),
               ('web:open', 'bob', 'now', 'done', 'open', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));`);
    v16.pragma('user_version = 16');
    v16.close();

    const db = openDatabase(path);
    const upgradedIn = hourOf();
    const fresh = openDatabase(join(dir, 'fresh.db'));
    expect(shape(db)).toEqual(shape(fresh));
    fresh.close();
    const counted = db
      .prepare(`SELECT content FROM messages INDEXED BY idx_messages_sender_counted WHERE counted = 1`)
      .pluck()
      .all();
    // The current hour of the limited group only (an upgrade just after the turn of the hour marks nothing).
    expect(counted).toEqual(insertedIn === upgradedIn ? ['now'] : []);
    expect(
      db.prepare(`SELECT count(*) FROM sqlite_master WHERE name = 'idx_messages_sender_hour'`).pluck().get(),
    ).toBe(0);
    db.close();
  });
});

describe('19 → 20', { timeout: 60_000 }, () => {
  it('tool_approvals is rebuilt with the state `cancelled`: rows, codes, indexes and the audit triggers kept', () => {
    const dir = tempDir();
    const path = join(dir, 'v19.db');
    const v19 = openDatabase(path);
    // The version-19 table: the same one without `cancelled` among its states.
    const objects = v19
      .prepare(`SELECT type, sql FROM sqlite_master WHERE tbl_name = 'tool_approvals' AND sql IS NOT NULL`)
      .all() as { type: string; sql: string }[];
    const table = objects.find((o) => o.type === 'table')!.sql;
    v19.exec('DROP TABLE tool_approvals');
    v19.exec(table.replace(", 'cancelled')", ')'));
    for (const o of objects.filter((x) => x.type !== 'table')) v19.exec(o.sql);
    v19.exec(`INSERT INTO tool_approvals (code, group_folder, chat_jid, tool, input_json, input_line, created_at,
                expires_at, turn_rows) VALUES ('ABCDE', 'club', 'web:club', 'Bash', '{}', 'ls', 1, 2, '[7]')`);
    expect(() => v19.exec(`UPDATE tool_approvals SET state = 'cancelled' WHERE code = 'ABCDE'`)).toThrow(
      /CHECK constraint failed/,
    );
    v19.pragma('user_version = 19');
    v19.close();

    const db = openDatabase(path);
    const fresh = openDatabase(join(dir, 'fresh.db'));
    expect(shape(db)).toEqual(shape(fresh));
    fresh.close();
    db.exec(
      `UPDATE tool_approvals SET state = 'cancelled', note = 'the turn was stopped' WHERE code = 'ABCDE'`,
    );
    expect(db.prepare('SELECT id, code, state, turn_rows FROM tool_approvals').all()).toEqual([
      { id: 1, code: 'ABCDE', state: 'cancelled', turn_rows: '[7]' },
    ]);
    // The trigger that audits a decision is there again.
    const audit = db
      .prepare(`SELECT action, after FROM audit WHERE subject = 'tool_approvals' ORDER BY id DESC LIMIT 1`)
      .get() as { action: string; after: string };
    expect(audit.action).toBe('update');
    expect(JSON.parse(audit.after)).toMatchObject({ code: 'ABCDE', state: 'cancelled' });
    // New rows take the next id.
    db.exec(`INSERT INTO tool_approvals (code, group_folder, chat_jid, tool, input_json, input_line, created_at,
               expires_at) VALUES ('FGHJK', 'club', 'web:club', 'Bash', '{}', 'ls', 1, 2)`);
    expect(db.prepare(`SELECT id FROM tool_approvals WHERE code = 'FGHJK'`).pluck().get()).toBe(2);
    db.close();
  });
});

describe('21 → 22', { timeout: 60_000 }, () => {
  it('limits gain tokens_per_day, the receipts and cost tables appear, a limits row is kept and audited', () => {
    const dir = tempDir();
    const path = join(dir, 'v21.db');
    const v21 = openDatabase(path);
    // The version-21 tables: limits without tokens_per_day, none of the new ones.
    for (const t of ['tool_calls', 'sender_limits', 'model_prices', 'usage_reports', 'budget_grants'])
      v21.exec(`DROP TABLE ${t}`);
    const triggers = v21
      .prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'limits'`)
      .pluck()
      .all() as string[];
    for (const t of triggers) v21.exec(`DROP TRIGGER "${t}"`);
    v21.exec('ALTER TABLE limits DROP COLUMN tokens_per_day');
    v21.exec(`INSERT INTO limits (group_folder, runs_per_day, cost_per_day_usd) VALUES ('club', 5, 2.5)`);
    v21.pragma('user_version = 21');
    v21.close();

    const db = openDatabase(path);
    const fresh = openDatabase(join(dir, 'fresh.db'));
    expect(shape(db)).toEqual(shape(fresh));
    fresh.close();
    expect(db.prepare('SELECT * FROM limits').all()).toEqual([
      {
        group_folder: 'club',
        sender_per_hour: null,
        runs_per_day: 5,
        cost_per_day_usd: 2.5,
        tokens_per_day: null,
      },
    ]);
    db.exec(`UPDATE limits SET tokens_per_day = 1000 WHERE group_folder = 'club'`);
    db.exec(`INSERT INTO model_prices (model, input_per_mtok, output_per_mtok) VALUES ('m', 3, 15)`);
    const subjects = db.prepare(`SELECT subject FROM audit ORDER BY id DESC LIMIT 2`).pluck().all();
    expect(subjects).toEqual(['model_prices', 'limits']);
    db.close();
  });
});

describe('going back', { timeout: 60_000 }, () => {
  it('gated run on a database from a newer gated exits 1 with one line that says the way back', async () => {
    const dir = tempDir();
    const raw = new Database(join(dir, 'gated.db'));
    raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    raw.close();
    const child = gatedRun(gatedEnv(dir));
    expect(await exited(child)).toBe(1);
    expect(stderrOf(child).trim().split('\n')).toEqual([
      `gated: cannot start: database schema version ${SCHEMA_VERSION + 1} is newer than this gated (${SCHEMA_VERSION}): run the newer gated, or restore the backup taken before the upgrade (gated restore FILE)`,
    ]);
  });
});
