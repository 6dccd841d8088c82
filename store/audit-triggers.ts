import type Database from 'better-sqlite3';

/** A connection (the Db type of db.ts, named here without importing it: db.ts imports this file). */
type Db = Database.Database;

/**
 * The audit triggers (docs/ACCESS.md, "Audit"; docs/SECURITY.md), generated from one list when the schema is
 * applied rather than written out by hand in schema.sql: each trigger records the whole row, every column
 * the table has at that moment, so a column another migration adds is audited from the next start with no
 * step of its own, and a new table is audited by adding one line here.
 *
 * What they record, whoever writes (gated, or sqlite3 on the same file):
 * - insert, update and delete, with the row before and after as JSON;
 * - `INSERT OR REPLACE`: a BEFORE INSERT trigger keeps the rows the insert is about to replace (any primary
 *   key or unique constraint) in `audit_replaced`, and the insert is then recorded as action `replace` with
 *   them as `before` (one row as an object, several as an array). Delete triggers do not fire for REPLACE
 *   (unless a connection turns on recursive_triggers), so this is the only way to keep that state;
 * - deleting or changing audit rows is itself recorded (subject `audit`).
 *
 * The actor: a change is named after the router_state row `audit_actor` only when the writing connection is
 * gated's own, which it tells the triggers by the per-connection flag `cell_size_check`: on for every
 * connection of openDatabase (store/db.ts), and inside `withActor` (store/audit.ts). Without the row, a
 * change of gated's connection is gated's own (`gated`: the tasks it fires, the tool questions it asks).
 * Any other connection (sqlite3) is recorded as `sql`, whatever `audit_actor` row it wrote, so such a row
 * cannot credit its edits to a name.
 *
 * An UPDATE that changes no column (every value the same, as the task loop's touches of a row often are)
 * is not recorded: its WHEN clause compares the whole row before and after.
 */

/** The audited tables and the column that names a row in `audit.row_key`. Add a table here; that is all. */
export const AUDITED_TABLES: Readonly<Record<string, string>> = {
  routes: 'id',
  registered_groups: 'folder',
  members: 'id',
  limits: 'group_folder',
  approvals: 'code',
  daemons: 'name',
  tasks: 'id',
  tool_rules: 'id',
  workflow_runs: 'id',
  workflow_events: 'id',
  sender_limits: 'group_folder',
  model_prices: 'model',
  memories: 'id',
};

const AUDIT_COLUMNS = ['id', 'at', 'actor', 'subject', 'action', 'row_key', 'before', 'after'];

/** The actor of a change: see the module comment. */
const ACTOR = `CASE WHEN (SELECT cell_size_check FROM pragma_cell_size_check) = 1
    THEN coalesce((SELECT value FROM router_state WHERE key = 'audit_actor'), 'gated') ELSE 'sql' END`;

const ident = (name: string): string => `"${name.replace(/"/g, '""')}"`;
const lit = (s: string): string => `'${s.replace(/'/g, "''")}'`;

function columnsOf(db: Db, table: string): string[] {
  // Sorted: a table upgraded by ALTER TABLE lists its columns in another order than a fresh one, and
  // both must get the same triggers.
  return (db.pragma(`table_info(${ident(table)})`) as Array<{ name: string }>).map((c) => c.name).sort();
}

function rowJson(alias: 'NEW' | 'OLD' | '', columns: readonly string[]): string {
  const ref = (c: string) => (alias ? `${alias}.${ident(c)}` : ident(c));
  return `json_object(${columns.map((c) => `${lit(c)}, ${ref(c)}`).join(', ')})`;
}

/** The rows an insert of NEW would replace: one condition per primary key or unique index of `table`. */
function conflictsOf(db: Db, table: string): string {
  const conds: string[] = [];
  const info = db.pragma(`table_info(${ident(table)})`) as Array<{ name: string; pk: number; type: string }>;
  const pk = info.filter((c) => c.pk > 0);
  // An INTEGER PRIMARY KEY is the rowid and has no index of its own.
  if (pk.length === 1 && /^integer$/i.test(pk[0]!.type)) conds.push(`rowid = NEW.${ident(pk[0]!.name)}`);
  const indexes = db.pragma(`index_list(${ident(table)})`) as Array<{ name: string; unique: number }>;
  for (const ix of indexes.filter((i) => i.unique === 1)) {
    const cols = (db.pragma(`index_info(${ident(ix.name)})`) as Array<{ name: string | null }>)
      .map((c) => c.name)
      .filter((c): c is string => c !== null);
    if (cols.length > 0) conds.push(`(${cols.map((c) => `${ident(c)} = NEW.${ident(c)}`).join(' AND ')})`);
  }
  return conds.length > 0 ? conds.join(' OR ') : '0';
}

/** True when some column of the row differs before and after an update (IS NOT: NULLs compare too). */
function changed(columns: readonly string[]): string {
  return columns.map((c) => `OLD.${ident(c)} IS NOT NEW.${ident(c)}`).join(' OR ');
}

function auditInsert(subject: string, action: string, key: string, before: string, after: string): string {
  return `INSERT INTO audit (actor, subject, action, row_key, before, after)
  VALUES (${ACTOR}, ${lit(subject)}, ${action}, ${key}, ${before}, ${after});`;
}

/** The CREATE TRIGGER statements for one audited table, by trigger name. */
export function auditTriggersFor(db: Db, table: string, key: string): Map<string, string> {
  const cols = columnsOf(db, table);
  const out = new Map<string, string>();
  if (cols.length === 0) return out;
  const t = ident(table);
  const replaced = `(SELECT before FROM audit_replaced WHERE subject = ${lit(table)})`;
  const forget = `DELETE FROM audit_replaced WHERE subject = ${lit(table)};`;
  const name = (op: string) => `audit_${table}_${op}`;
  out.set(
    name('replaced'),
    `CREATE TRIGGER ${name('replaced')} BEFORE INSERT ON ${t} BEGIN
  INSERT OR REPLACE INTO audit_replaced (subject, before)
  SELECT ${lit(table)}, CASE count(*) WHEN 0 THEN NULL WHEN 1 THEN min(j) ELSE json_group_array(json(j)) END
    FROM (SELECT ${rowJson('', cols)} AS j FROM ${t} WHERE ${conflictsOf(db, table)});
END`,
  );
  out.set(
    name('insert'),
    `CREATE TRIGGER ${name('insert')} AFTER INSERT ON ${t} BEGIN
  ${auditInsert(table, `CASE WHEN ${replaced} IS NULL THEN 'insert' ELSE 'replace' END`, `NEW.${ident(key)}`, replaced, rowJson('NEW', cols))}
  ${forget}
END`,
  );
  out.set(
    name('update'),
    `CREATE TRIGGER ${name('update')} AFTER UPDATE ON ${t} WHEN ${changed(cols)} BEGIN
  ${auditInsert(table, "'update'", `NEW.${ident(key)}`, rowJson('OLD', cols), rowJson('NEW', cols))}
  ${forget}
END`,
  );
  out.set(
    name('delete'),
    `CREATE TRIGGER ${name('delete')} AFTER DELETE ON ${t} BEGIN
  ${auditInsert(table, "'delete'", `OLD.${ident(key)}`, rowJson('OLD', cols), 'NULL')}
END`,
  );
  return out;
}

/**
 * Tool questions (tool_approvals): only what a person decides is kept, the question when it is asked and
 * each change of its state, with the columns that say who decided what. Same actor as every other trigger.
 */
function auditOfToolApprovals(): Map<string, string> {
  const asked = `json_object('code', NEW.code, 'group_folder', NEW.group_folder, 'chat_jid', NEW.chat_jid, 'tool', NEW.tool, 'input', NEW.input_line, 'state', NEW.state, 'expires_at', NEW.expires_at)`;
  const decided = (row: 'OLD' | 'NEW') =>
    `json_object('code', ${row}.code, 'state', ${row}.state, 'decided_by', ${row}.decided_by, 'note', ${row}.note)`;
  return new Map([
    [
      'audit_tool_approvals_insert',
      `CREATE TRIGGER audit_tool_approvals_insert AFTER INSERT ON tool_approvals BEGIN
  ${auditInsert('tool_approvals', "'insert'", 'NEW.code', 'NULL', asked)}
END`,
    ],
    [
      'audit_tool_approvals_update',
      `CREATE TRIGGER audit_tool_approvals_update AFTER UPDATE OF state ON tool_approvals WHEN OLD.state IS NOT NEW.state BEGIN
  ${auditInsert('tool_approvals', "'update'", 'NEW.code', decided('OLD'), decided('NEW'))}
END`,
    ],
  ]);
}

/** Triggers that record changes to the audit trail itself. */
function auditOfAudit(): Map<string, string> {
  return new Map([
    [
      'audit_audit_delete',
      `CREATE TRIGGER audit_audit_delete AFTER DELETE ON audit BEGIN
  ${auditInsert('audit', "'delete'", 'OLD.id', rowJson('OLD', AUDIT_COLUMNS), 'NULL')}
END`,
    ],
    [
      'audit_audit_update',
      `CREATE TRIGGER audit_audit_update AFTER UPDATE ON audit BEGIN
  ${auditInsert('audit', "'update'", 'OLD.id', rowJson('OLD', AUDIT_COLUMNS), rowJson('NEW', AUDIT_COLUMNS))}
END`,
    ],
  ]);
}

/**
 * Creates or refreshes the audit triggers (call inside the schema transaction). A trigger whose text is
 * already current is left alone, so a start that changes nothing does not change the schema either.
 */
export function installAuditTriggers(db: Db): void {
  const current = db.prepare(`SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?`).pluck();
  const wanted = new Map([...auditOfAudit(), ...auditOfToolApprovals()]);
  for (const [table, key] of Object.entries(AUDITED_TABLES)) {
    for (const [name, sql] of auditTriggersFor(db, table, key)) wanted.set(name, sql);
  }
  for (const [name, sql] of wanted) {
    if (current.get(name) === sql) continue;
    db.exec(`DROP TRIGGER IF EXISTS ${ident(name)}`);
    db.exec(sql);
  }
}
