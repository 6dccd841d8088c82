import type { Db } from './db.js';

/**
 * The audit trail (docs/ACCESS.md, "Audit"). Triggers on routes, registered_groups, members, limits and
 * approvals write every change into `audit`, whoever makes it; this module only names the actor for the
 * changes gated itself makes and reads the trail back.
 */

/** One audit row; `before` / `after` are JSON of the row (null for an insert / a delete). */
export interface AuditRow {
  id: number;
  at: string;
  actor: string;
  subject: string;
  action: 'insert' | 'update' | 'delete';
  row_key: string | null;
  before: string | null;
  after: string | null;
}

const ACTOR_KEY = 'audit_actor';
const stmts = new WeakMap<Db, ReturnType<typeof prepare>>();

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
 * connection ever sees it and a later sqlite3 edit is recorded as 'sql'. Nests: an inner actor is restored
 * to the outer one when the inner call ends.
 */
export function withActor<T>(db: Db, actor: string, fn: () => T): T {
  const s = statements(db);
  return db.transaction(() => {
    const outer = s.get.get() as string | undefined;
    s.set.run(actor);
    try {
      return fn();
    } finally {
      if (outer === undefined) s.clear.run();
      else s.set.run(outer);
    }
  })();
}

/** Audit rows at or after `since` (ISO-8601; a date alone works), newest first, at most `limit`. */
export function listAudit(db: Db, opts: { since?: string; limit?: number } = {}): AuditRow[] {
  return db
    .prepare(`SELECT * FROM audit WHERE at >= ? ORDER BY id DESC LIMIT ?`)
    .all(opts.since ?? '', opts.limit ?? 200) as AuditRow[];
}
