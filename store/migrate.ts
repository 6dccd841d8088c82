import type Database from 'better-sqlite3';

/** The schema version this code writes and expects (PRAGMA user_version). */
export const SCHEMA_VERSION = 28;

/**
 * In-place upgrades, one function per version step: MIGRATIONS[n] takes a database from version n to
 * n + 1. schema.sql always describes the newest tables, so a fresh database only records the version;
 * an older one runs the steps it is missing (ALTER TABLE … ADD COLUMN and the like).
 */
const MIGRATIONS: Record<number, (db: Database.Database) => void> = {
  // 0 → 1: the first released schema; schema.sql created everything.
  0: () => {},
  // 1 → 2: access (docs/ACCESS.md): a group's access mode, and the usage a run reported. Also what
  // schema.sql changed while still at version 1 (test/store/upgrade.test.ts upgrades the first schema):
  // dispatched_at (without the column every dispatch would fail), and the work index the per-state indexes
  // replaced.
  1: (db) => {
    addColumn(db, 'messages', 'dispatched_at', 'INTEGER');
    db.exec('DROP INDEX IF EXISTS idx_messages_work');
    addColumn(db, 'registered_groups', 'access', "TEXT NOT NULL DEFAULT 'open'");
    addColumn(db, 'session_log', 'input_tokens', 'INTEGER');
    addColumn(db, 'session_log', 'output_tokens', 'INTEGER');
    addColumn(db, 'session_log', 'cost_usd', 'REAL');
  },
  // 2 → 3: what agents may do besides answering (send targets and allowed action types per group).
  2: (db) => {
    addColumn(db, 'registered_groups', 'send_allow', 'TEXT');
    addColumn(db, 'registered_groups', 'actions', 'TEXT');
  },
  // 3 → 4: the text the agent gets when a prefix layer stripped it, kept apart from the stored text.
  3: (db) => {
    addColumn(db, 'messages', 'agent_content', 'TEXT');
  },
  // 4 → 5: turns (docs/PROTOCOL.md): the turn of its run that carried each row.
  4: (db) => addColumn(db, 'messages', 'turn', 'INTEGER'),
  // 5 → 6: where a group's runs may go on a swarm, and what they reserve (JSON, docs/SCALING.md).
  5: (db) => addColumn(db, 'registered_groups', 'placement', 'TEXT'),
  // 6 → 7: the readiness index covers the group, topic and backoff, so the queue's fair pick skips busy
  // groups without reading the table (schema.sql creates idx_messages_ready_walk).
  6: (db) => db.exec('DROP INDEX IF EXISTS idx_messages_ready_order'),
  // 7 → 8: a draft per chat thread (two web chat topics stream at once): the key becomes (chat_jid, thread),
  // which needs the table rebuilt; its rows (drafts of threadless chats) keep their ids.
  7: (db) => {
    const cols = db.pragma('table_info(drafts)') as { name: string }[];
    if (cols.some((c) => c.name === 'thread')) return;
    db.exec(`
      CREATE TABLE drafts_v8 (
        chat_jid TEXT NOT NULL, thread TEXT NOT NULL DEFAULT '', run_id INTEGER, turn INTEGER,
        platform_msg_id TEXT, text TEXT, final INTEGER NOT NULL DEFAULT 0, updated_at INTEGER,
        PRIMARY KEY (chat_jid, thread));
      INSERT INTO drafts_v8 (chat_jid, run_id, turn, platform_msg_id, text, final, updated_at)
        SELECT chat_jid, run_id, turn, platform_msg_id, text, final, updated_at FROM drafts;
      DROP TABLE drafts;
      ALTER TABLE drafts_v8 RENAME TO drafts;`);
  },
  // 8 → 9: each group its own agent and model (docs/AGENTS.md), and agent profiles an operator defines.
  8: (db) => {
    addColumn(db, 'registered_groups', 'agent', 'TEXT');
    addColumn(db, 'registered_groups', 'model', 'TEXT');
    db.exec(`CREATE TABLE IF NOT EXISTS agent_profiles (
      name TEXT PRIMARY KEY, image TEXT, command TEXT, model TEXT,
      added_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))`);
  },
  // 9 → 10: steering a turn in progress (docs/PROTOCOL.md): what a message does while its session's agent is
  // busy, the /interrupt messages, and the blocks that reported a compacted session.
  9: (db) => {
    addColumn(db, 'registered_groups', 'busy', "TEXT NOT NULL DEFAULT 'queue'");
    addColumn(db, 'messages', 'interrupts', 'INTEGER');
    addColumn(db, 'session_log', 'compacted', 'INTEGER');
  },
  // 10 → 11: platform threads as topics or as replies, per group (docs/CHANNELS.md, docs/ROUTING.md).
  10: (db) => addColumn(db, 'registered_groups', 'threads', "TEXT NOT NULL DEFAULT 'topics'"),
  // 11 → 12: a delegation chain is one conversation bounded per originating message (docs/SECURITY.md): the
  // message each delegation's chain started from (schema.sql creates delegation_rows, the chain's rows).
  // Older delegations count as chains of their own delegated row.
  11: (db) => {
    addColumn(db, 'delegations', 'origin', 'INTEGER');
    db.exec('UPDATE delegations SET origin = message_id WHERE origin IS NULL');
  },
  // 12 → 13: registered_groups.network names the docker network a group's containers join instead of
  // switching one on (1 meant the runtime's fixed 'bridge', so it becomes 'bridge'; 0 becomes NULL: none).
  12: (db) => networkAsName(db),
  // 13 → 14: dispatched_at is written by the UPDATE that hands a row to an agent (store/queue-sql.ts); the
  // trigger that set it rewrote every dispatched row a second time.
  13: (db) => db.exec('DROP TRIGGER IF EXISTS messages_dispatched'),
  // 14 → 15: a run's time split into work and idle (docs/WEB.md): how long its agent waited for a
  // follow-up. Older runs have NULL: their split is not known.
  14: (db) => addColumn(db, 'session_log', 'idle_ms', 'INTEGER'),
  // 15 → 16: the cost of a row's state changes (issue 30). The backoff index holds only the ready rows that
  // wait for one (schema.sql creates idx_messages_backoff): its predecessor took every ready row in and out.
  15: (db) => db.exec('DROP INDEX IF EXISTS idx_messages_retry'),
  // 16 → 17: only rows routed to a group that limits messages per sender per hour are counted and indexed
  // for that limit (issue 30: every routed row used to enter the index). The rows of the current hour of
  // such groups are marked, so an upgrade keeps the windows in progress.
  16: (db) => countedRows(db),
  // 17 → 18: who the sender is, as far as the platform vouches (issue 39, docs/ACCESS.md "Who is the
  // sender"): an email's authentication verdict, GitHub's author_association. Older email rows have none,
  // so their senders count as strangers from now on.
  17: (db) => {
    addColumn(db, 'messages', 'sender_auth', 'TEXT');
    addColumn(db, 'messages', 'platform_role', 'TEXT');
  },
  // 18 → 19: autonomy per group (docs/APPROVALS.md, "Autonomy"): the preset that decides the tool calls no
  // rule decides. Existing groups become `supervised` like new ones (docs/OPERATIONS.md, "Upgrading").
  18: (db) => addColumn(db, 'registered_groups', 'autonomy', "TEXT NOT NULL DEFAULT 'supervised'"),
  // 19 → 20: an ask whose turn was stopped, interrupted or ended is `cancelled` (docs/APPROVALS.md): the
  // state's CHECK names it, which needs the table rebuilt; its rows keep their ids and codes.
  19: (db) => cancelledAsks(db),
  // 20 → 21: workflows (docs/WORKFLOWS.md): schema.sql creates workflow_runs and workflow_events; nothing
  // older changes.
  20: () => {},
  // 21 → 22: tool calls and their receipts, limits per sender, prices per model, usage reports and the
  // budgets approvers granted (docs/SECURITY.md, "Receipts"; docs/COSTS.md): new tables schema.sql makes,
  // and a daily token limit per group.
  21: (db) => addColumn(db, 'limits', 'tokens_per_day', 'INTEGER'),
  // 22 → 23: voice (docs/VOICE.md): which rows came with audio, which content is a transcript, and which
  // file of a reply is its spoken text (schema.sql creates transcriptions and its indexes).
  22: (db) => {
    addColumn(db, 'messages', 'audio', 'INTEGER');
    addColumn(db, 'messages', 'transcript', 'INTEGER');
    addColumn(db, 'outbound_files', 'spoken', 'INTEGER');
  },
  // 23 → 24: memory (docs/MEMORY.md): schema.sql creates memories, its full-text index and that of the
  // messages; the history indexer fills the latter from the first row on (its cursor starts at 0).
  23: () => {},
  // 24 → 25: codebases and worktrees (docs/WORKTREES.md): schema.sql creates group_repos (a group's
  // repository) and worktrees (one per topic of such a group); nothing older changes.
  24: () => {},
  // 25 → 26: a topic's worktree may be asked to go (/new #topic, its issue or PR closed, the operator):
  // why, and the chat told what became of its branch (docs/WORKTREES.md, "Removal").
  25: (db) => {
    addColumn(db, 'worktrees', 'remove_reason', 'TEXT');
    addColumn(db, 'worktrees', 'remove_chat', 'TEXT');
  },
  // 26 → 27: the history index names each row's sender too (who), so a stranger's search reads only its own
  // rows inside MATCH, and has a vocabulary table (the share of rows a word is in). The index of schema 24
  // is made again: dropped here, refilled by the history indexer from its cursor, reset to 0.
  26: (db) => historyIndexV27(db),
  // 27 → 28: no vocabulary table of the history index: it walked every row of a word to count them, the
  // very cost it was to spare a search (store/fts-terms.ts counts up to a limit with a MATCH instead).
  27: (db) => db.exec('DROP TABLE IF EXISTS messages_fts_terms'),
};

/** The 26 → 27 step: messages_fts with its `who` column and messages_fts_terms; the indexer starts over. */
function historyIndexV27(db: Database.Database): void {
  const sql = db
    .prepare(`SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'messages_fts'`)
    .pluck()
    .get() as string | undefined;
  if (sql !== undefined && /\bwho\b/.test(sql)) return;
  db.exec(`
    DROP TABLE IF EXISTS messages_fts_terms;
    DROP TABLE IF EXISTS messages_fts;
    CREATE VIRTUAL TABLE messages_fts USING fts5(
      content, grp, who, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');
    CREATE VIRTUAL TABLE messages_fts_terms USING fts5vocab(messages_fts, row);
    DELETE FROM router_state WHERE key = 'history_index_cursor';`);
}

/** The 19 → 20 step: tool_approvals rebuilt with `cancelled` among its states, indexes and triggers kept. */
function cancelledAsks(db: Database.Database): void {
  const objects = db
    .prepare(`SELECT type, sql FROM sqlite_master WHERE tbl_name = 'tool_approvals' AND sql IS NOT NULL`)
    .all() as { type: string; sql: string }[];
  const table = objects.find((o) => o.type === 'table');
  if (table === undefined || table.sql.includes("'cancelled'")) return;
  const rebuilt = table.sql
    .replace("'expired')", "'expired', 'cancelled')")
    .replace(/^CREATE TABLE (IF NOT EXISTS )?"?tool_approvals"?/, 'CREATE TABLE tool_approvals_v20');
  if (!rebuilt.includes("'cancelled'"))
    throw new Error('tool_approvals: the state CHECK is not the known one');
  db.exec(rebuilt);
  db.exec('INSERT INTO tool_approvals_v20 SELECT * FROM tool_approvals');
  db.exec('DROP TABLE tool_approvals');
  db.exec('ALTER TABLE tool_approvals_v20 RENAME TO tool_approvals');
  // Dropping the table dropped its indexes and triggers: made again as they were.
  for (const o of objects.filter((x) => x.type !== 'table')) db.exec(o.sql);
}

/** The 16 → 17 step: the column `counted`, the current hour's rows of limited groups, and its index. */
function countedRows(db: Database.Database): void {
  addColumn(db, 'messages', 'counted', 'INTEGER');
  const hour = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000).toISOString();
  db.prepare(
    `UPDATE messages SET counted = 1
     WHERE is_from_me = 0 AND timestamp >= ? AND counted IS NULL
       AND group_folder IN (SELECT group_folder FROM limits WHERE sender_per_hour IS NOT NULL)`,
  ).run(hour);
  db.exec(`CREATE INDEX IF NOT EXISTS idx_messages_sender_counted
             ON messages(group_folder, sender, timestamp, chat_jid) WHERE counted = 1`);
}

/** The 12 → 13 step: the integer column `network` replaced by a text one of the same name. */
function networkAsName(db: Database.Database): void {
  const cols = db.pragma('table_info(registered_groups)') as { name: string; type: string }[];
  const col = cols.find((c) => c.name === 'network');
  if (col === undefined || col.type.toUpperCase() === 'TEXT') return;
  // The audit triggers name every column; they are made again from the new columns after the migrations.
  const triggers = db
    .prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'registered_groups'`)
    .pluck()
    .all() as string[];
  for (const t of triggers.filter((n) => n.startsWith('audit_')))
    db.exec(`DROP TRIGGER "${t.replace(/"/g, '""')}"`);
  db.exec(`
    ALTER TABLE registered_groups ADD COLUMN network_name TEXT;
    UPDATE registered_groups SET network_name = CASE WHEN network <> 0 THEN 'bridge' END;
    ALTER TABLE registered_groups DROP COLUMN network;
    ALTER TABLE registered_groups RENAME COLUMN network_name TO network;`);
}

/**
 * Adds a column unless the table has it: schema.sql already creates the newest tables on a fresh database,
 * and another step may have added the same column first.
 */
function addColumn(db: Database.Database, table: string, column: string, decl: string): void {
  const cols = db.pragma(`table_info(${table})`) as { name: string }[];
  if (!cols.some((c) => c.name === column)) db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${decl}`);
}

/** Runs the missing steps inside the caller's transaction. Refuses a database newer than this code. */
export function migrate(db: Database.Database): void {
  let version = db.pragma('user_version', { simple: true }) as number;
  if (version > SCHEMA_VERSION) {
    throw new Error(
      `database schema version ${version} is newer than this gated (${SCHEMA_VERSION}): run the newer gated, or restore the backup taken before the upgrade (gated restore FILE)`,
    );
  }
  while (version < SCHEMA_VERSION) {
    const step = MIGRATIONS[version];
    if (!step) throw new Error(`no migration from schema version ${version}`);
    step(db);
    version += 1;
    db.pragma(`user_version = ${version}`);
  }
}
