import type { Db } from './db.js';
import { whenWritable } from './group-commit.js';

/**
 * The audit trail (docs/ACCESS.md, "Audit"). Triggers generated from the list in audit-triggers.ts write
 * every change of the audited tables into `audit`, whoever makes it; this module only names the actor for
 * the changes gated itself makes and reads the trail back.
 */

/** One audit row; `before` / `after` are JSON of the row (null for an insert / a delete). */
export interface AuditRow {
  id: number;
  at: string;
  actor: string;
  subject: string;
  action: 'insert' | 'update' | 'delete' | 'replace';
  row_key: string | null;
  before: string | null;
  after: string | null;
}

const ACTOR_KEY = 'audit_actor';
const stmts = new WeakMap<Db, ReturnType<typeof prepare>>();
/** How deep each connection is in withActor calls: the flag goes on at the first and off after the last. */
const depth = new WeakMap<Db, number>();

function prepare(db: Db) {
  return {
    get: db.prepare(`SELECT value FROM router_state WHERE key = '${ACTOR_KEY}'`).pluck(),
    set: db.prepare(
      `INSERT INTO router_state (key, value) VALUES ('${ACTOR_KEY}', ?)
       ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    ),
    clear: db.prepare(`DELETE FROM router_state WHERE key = '${ACTOR_KEY}'`),
  };
}

function statements(db: Db) {
  let s = stmts.get(db);
  if (!s) stmts.set(db, (s = prepare(db)));
  return s;
}

/**
 * Runs `fn` in a transaction with `actor` named as the author of every audited change it makes. The actor
 * is a router_state row that lives only inside that transaction (set first, restored last), so no other
 * connection ever sees it. The triggers honour it only while this connection's `cell_size_check` flag is
 * on, which it is on gated's own connections (openDatabase) and inside this call (audit-triggers.ts): a row
 * some sqlite3 session wrote itself never names its edits, which are recorded as 'sql'; gated's changes
 * outside any withActor are recorded as 'gated'. Nests: an inner actor is restored to the outer one when
 * the inner call ends.
 */
export function withActor<T>(db: Db, actor: string, fn: () => T): T {
  const s = statements(db);
  const level = depth.get(db) ?? 0;
  // A connection of openDatabase has it on already (its own writes are gated's); another is turned back.
  const was = level === 0 ? (db.pragma('cell_size_check', { simple: true }) as number) : 1;
  if (level === 0 && was !== 1) db.pragma('cell_size_check = ON');
  depth.set(db, level + 1);
  try {
    return db.transaction(() => {
      const outer = level === 0 ? undefined : (s.get.get() as string | undefined);
      s.set.run(actor);
      try {
        return fn();
      } finally {
        if (outer === undefined) s.clear.run();
        else s.set.run(outer);
      }
    })();
  } finally {
    depth.set(db, level);
    if (level === 0 && was !== 1) db.pragma('cell_size_check = OFF');
  }
}

/**
 * `withActor` once the write lock can be had without the event loop waiting for another process's
 * (`whenWritable`): for an operator's edit through the HTTP API while, say, a `sqlite3` session keeps a
 * transaction open.
 */
export function withActorWhenWritable<T>(db: Db, actor: string, fn: () => T): Promise<T> {
  return whenWritable(db, () => withActor(db, actor, fn));
}

/** Audit rows at or after `since` (ISO-8601; a date alone works), newest first, at most `limit`. */
export function listAudit(db: Db, opts: { since?: string; limit?: number } = {}): AuditRow[] {
  return db
    .prepare(`SELECT * FROM audit WHERE at >= ? ORDER BY id DESC LIMIT ?`)
    .all(opts.since ?? '', opts.limit ?? 200) as AuditRow[];
}
