import { compileRoutes, type RouteRow, type RouteTable } from '../../router/index.js';
import type { Db } from './db.js';

/** Reads `routes` rows in table order. */
export function listRoutes(db: Db): RouteRow[] {
  return db.prepare('SELECT id, seq, match, target, impulse_config FROM routes ORDER BY seq, id').all() as RouteRow[];
}

/** Inserts a route row; the caller validated it. Returns the new id. */
export function addRoute(db: Db, row: { seq: number; match: string; target: string; impulse_config?: string | null }) {
  const info = db
    .prepare('INSERT INTO routes (seq, match, target, impulse_config) VALUES (?, ?, ?, ?)')
    .run(row.seq, row.match, row.target, row.impulse_config ?? null);
  return Number(info.lastInsertRowid);
}

/** Deletes a route row; false when there was none. */
export function removeRoute(db: Db, id: number): boolean {
  return db.prepare('DELETE FROM routes WHERE id = ?').run(id).changes > 0;
}

/** Hit counts by route id. */
export function routeHits(db: Db): Map<number, number> {
  const rows = db.prepare('SELECT route_id, hits FROM route_hits').all() as { route_id: number; hits: number }[];
  return new Map(rows.map((r) => [r.route_id, r.hits]));
}

/**
 * The live routing table of a running gated. Triggers bump router_state 'routes_version' on every change to
 * routes, daemons or registered_groups, by any process; `current()` reads that one value (a primary-key
 * lookup) and recompiles only when it moved. Edits made with sqlite3 therefore take effect on the next
 * lookup after they commit, without a restart and without re-reading the table per message.
 */
export class RouteSource {
  private version = '';
  private table: RouteTable = compileRoutes([]);
  private readonly versionStmt;

  /** `onChange` is told about each newly compiled table (the gateway logs invalid rows once per change). */
  constructor(
    private readonly db: Db,
    private readonly onChange?: (table: RouteTable) => void,
  ) {
    this.versionStmt = db.prepare("SELECT value FROM router_state WHERE key = 'routes_version'").pluck();
  }

  /** The table as of the latest committed change. */
  current(): RouteTable {
    const v = String(this.versionStmt.get() ?? '');
    if (v !== this.version) {
      this.version = v;
      this.table = compileRoutes(listRoutes(this.db));
      this.onChange?.(this.table);
    }
    return this.table;
  }

  /** The version the current table was compiled from (the dashboard shows it). */
  get tableVersion(): string {
    return this.version;
  }
}
