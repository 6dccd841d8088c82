import { UsageError } from '../core/errors.js';
import { checkRoute, compileRoutes, type RouteRow, type RouteTable } from '../router/index.js';
import type { Db } from './db.js';

/** Reads `routes` rows in table order. */
export function listRoutes(db: Db): RouteRow[] {
  return db
    .prepare('SELECT id, seq, match, target, impulse_config FROM routes ORDER BY seq, id')
    .all() as RouteRow[];
}

/** Inserts a route row; the caller validated it. Returns the new id. */
export function addRoute(
  db: Db,
  row: { seq: number; match: string; target: string; impulse_config?: string | null },
) {
  const info = db
    .prepare('INSERT INTO routes (seq, match, target, impulse_config) VALUES (?, ?, ?, ?)')
    .run(row.seq, row.match, row.target, row.impulse_config ?? null);
  return Number(info.lastInsertRowid);
}

/** A route as `gated routes add` and the dashboard take it. */
export interface NewRoute {
  seq: number;
  match: string;
  target: string;
  impulse_config: string | null;
}

/**
 * Adds a route after the router's own check (keys, globs, target syntax, impulse_config), so a row is
 * refused for exactly the reasons it would never match. The CLI and the dashboard both add through here.
 * Throws UsageError with a one-line reason; returns the new id.
 */
export function addCheckedRoute(db: Db, row: NewRoute): number {
  if (!Number.isSafeInteger(row.seq)) throw new UsageError(`seq must be an integer, got '${row.seq}'`);
  const reason = checkRoute(row);
  if (reason) throw new UsageError(`route refused: ${reason}`);
  return addRoute(db, row);
}

/** Deletes a route row; false when there was none. */
export function removeRoute(db: Db, id: number): boolean {
  return db.prepare('DELETE FROM routes WHERE id = ?').run(id).changes > 0;
}

/** Hit counts by route id. */
export function routeHits(db: Db): Map<number, number> {
  const rows = db.prepare('SELECT route_id, hits FROM route_hits').all() as {
    route_id: number;
    hits: number;
  }[];
  return new Map(rows.map((r) => [r.route_id, r.hits]));
}

/** What the layers look up, compiled together once per version of routes / daemons / registered_groups. */
export interface Catalog {
  version: string;
  table: RouteTable;
  /** Registered group folders. */
  groups: ReadonlySet<string>;
  /** Daemon name → URL. */
  daemons: ReadonlyMap<string, string>;
}

/**
 * The live routing table of a running gated. Triggers bump router_state 'routes_version' on every change to
 * routes, daemons or registered_groups, by any process; `current()` reads that one value (a primary-key
 * lookup) and recompiles only when it moved. Edits made with sqlite3 therefore take effect on the next
 * lookup after they commit, without a restart and without re-reading the table per message.
 */
export class RouteSource {
  private catalog: Catalog | undefined;
  private readonly versionStmt;
  private readonly groupsStmt;
  private readonly daemonsStmt;

  /** `onChange` is told about each newly compiled catalog (the gateway logs invalid rows once per change). */
  constructor(
    private readonly db: Db,
    private readonly onChange?: (catalog: Catalog) => void,
  ) {
    this.versionStmt = db.prepare("SELECT value FROM router_state WHERE key = 'routes_version'").pluck();
    this.groupsStmt = db.prepare('SELECT folder FROM registered_groups').pluck();
    this.daemonsStmt = db.prepare('SELECT name, url FROM daemons');
  }

  /** The catalog as of the latest committed change. */
  current(): Catalog {
    const version = String(this.versionStmt.get() ?? '');
    if (this.catalog?.version !== version) {
      const daemons = this.daemonsStmt.all() as { name: string; url: string }[];
      this.catalog = {
        version,
        table: compileRoutes(listRoutes(this.db)),
        groups: new Set(this.groupsStmt.all() as string[]),
        daemons: new Map(daemons.map((d) => [d.name, d.url])),
      };
      this.onChange?.(this.catalog);
    }
    return this.catalog;
  }

  /** The routing table as of the latest committed change. */
  table(): RouteTable {
    return this.current().table;
  }
}
