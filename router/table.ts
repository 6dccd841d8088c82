import type { RouteFields } from '../core/types.js';
import { DEFAULT_IMPULSE, parseImpulseConfig, type ImpulseConfig } from './impulse.js';
import { firstMismatch, MATCH_KEYS, parseMatch, type MatchKey, type Predicate } from './match.js';
import { formatTarget, parseTarget, type Target } from './target.js';

/** One row of the `routes` table as stored. */
export interface RouteRow {
  id: number;
  seq: number;
  match: string;
  target: string;
  impulse_config: string | null;
}

/** A row that can take messages. */
export interface Route {
  row: RouteRow;
  preds: Predicate[];
  target: Target;
  impulse: ImpulseConfig;
  /** Set when impulse_config was unusable: the defaults apply and the row is reported. */
  impulseError: string | undefined;
  /** Position in table order (seq, id), for merging candidate lists. */
  rank: number;
}

/** A row that never matches, with the reason. */
export interface InvalidRoute {
  row: RouteRow;
  reason: string;
}

/** One problem `gated routes check` reports: the row's id and why. */
export interface RouteProblem {
  id: number;
  reason: string;
}

/** explain's verdict on one row. */
export type ExplainLine =
  | { row: RouteRow; verdict: 'matched'; target: string }
  | { row: RouteRow; verdict: 'shadowed'; target: string }
  | { row: RouteRow; verdict: 'no-match'; key: MatchKey; glob: string; value: string }
  | { row: RouteRow; verdict: 'invalid'; reason: string };

/** The outcome of a lookup: the route that took the message and its target. */
export interface Resolution {
  route: Route;
  target: Target;
}

/**
 * Checks one row exactly as the table would compile it. Returns the reason it is invalid, or null. Used by
 * `gated routes add` and the dashboard, so a row is refused for the same reasons it would never match.
 */
export function checkRoute(
  row: Pick<RouteRow, 'match' | 'target' | 'impulse_config'> & Partial<Pick<RouteRow, 'seq'>>,
): string | null {
  const bad = rowTypeError(row);
  if (bad) return bad;
  const preds = parseMatch(row.match);
  if ('error' in preds) return preds.error;
  const target = parseTarget(row.target);
  if ('error' in target) return target.error;
  const impulse = parseImpulseConfig(row.impulse_config);
  return 'error' in impulse ? impulse.error : null;
}

/**
 * Why a row's columns have the wrong types, or null. Rows can be written by any program with sqlite3, and
 * SQLite stores whatever it is given: a text `seq` or a BLOB `match` must make the row invalid, not make
 * the compiler throw or sort the table differently from `routes list`.
 */
export function rowTypeError(
  row: Partial<Pick<RouteRow, 'seq' | 'match' | 'target' | 'impulse_config'>>,
): string | null {
  if ('seq' in row && !Number.isSafeInteger(row.seq)) return `seq is not an integer (${describe(row.seq)})`;
  if (typeof row.match !== 'string') return `match is not text (${describe(row.match)})`;
  if (typeof row.target !== 'string') return `target is not text (${describe(row.target)})`;
  const ic = row.impulse_config;
  if (ic !== null && ic !== undefined && typeof ic !== 'string') {
    return `impulse_config is not text (${describe(ic)})`;
  }
  return null;
}

function describe(v: unknown): string {
  if (v instanceof Uint8Array) return `a ${v.length}-byte blob`;
  if (typeof v === 'string') return `'${v.length > 32 ? v.slice(0, 32) + '…' : v}'`;
  return String(v);
}

/** SQLite's order of storage classes: numbers, then text, then blobs. */
function storageRank(v: unknown): number {
  if (typeof v === 'number' || typeof v === 'bigint') return 0;
  if (typeof v === 'string') return 1;
  return 2;
}

/**
 * Table order, the same as `ORDER BY seq, id` in SQLite for any stored seq (numbers before text before
 * blobs), so `routes list`, explain and resolution agree even on rows with a wrong-typed seq.
 */
function byOrder(a: RouteRow, b: RouteRow): number {
  const ra = storageRank(a.seq);
  const rb = storageRank(b.seq);
  if (ra !== rb) return ra - rb;
  if (ra === 0) return Number(a.seq) - Number(b.seq) || a.id - b.id;
  if (ra === 1) return (a.seq < b.seq ? -1 : a.seq > b.seq ? 1 : 0) || a.id - b.id;
  return a.id - b.id;
}

/**
 * All routes compiled once per table version. Lookup walks rows in (seq, id) order and returns the first
 * whose predicates all hold. To keep that cheap with thousands of rows, routes are indexed by the key that
 * most of them test with a literal value (usually `room` or `chat_jid`): a lookup only visits the routes
 * filed under the message's value of that key plus the routes that do not pin it, merged in table order.
 */
export class RouteTable {
  readonly routes: readonly Route[];
  readonly invalidRows: readonly InvalidRoute[];
  private readonly rows: readonly RouteRow[];
  private readonly indexKey: MatchKey | undefined;
  private readonly byValue = new Map<string, Route[]>();
  private readonly unpinned: Route[] = [];

  constructor(rows: readonly RouteRow[]) {
    this.rows = [...rows].sort(byOrder);
    const routes: Route[] = [];
    const invalid: InvalidRoute[] = [];
    for (const row of this.rows) {
      const bad = rowTypeError(row);
      if (bad) {
        invalid.push({ row, reason: bad });
        continue;
      }
      const preds = parseMatch(row.match);
      const target = parseTarget(row.target);
      if ('error' in preds) invalid.push({ row, reason: preds.error });
      else if ('error' in target) invalid.push({ row, reason: target.error });
      else {
        const impulse = parseImpulseConfig(row.impulse_config);
        routes.push({
          row,
          preds,
          target,
          impulse: 'error' in impulse ? DEFAULT_IMPULSE : impulse,
          impulseError: 'error' in impulse ? impulse.error : undefined,
          rank: routes.length,
        });
      }
    }
    this.routes = routes;
    this.invalidRows = invalid;
    this.indexKey = chooseIndexKey(routes);
    for (const r of routes) {
      const lit = this.indexKey && r.preds.find((p) => p.key === this.indexKey)?.literal;
      if (lit === undefined) this.unpinned.push(r);
      else {
        const list = this.byValue.get(lit);
        if (list) list.push(r);
        else this.byValue.set(lit, [r]);
      }
    }
  }

  /** The first route (by seq, then id) that takes a message with these fields, or null. */
  resolve(fields: RouteFields): Resolution | null {
    const pinned = this.indexKey ? this.byValue.get(fields[this.indexKey]) : undefined;
    const a = pinned ?? [];
    const b = this.unpinned;
    let i = 0;
    let j = 0;
    // Both lists are in table order; walk them as one.
    while (i < a.length || j < b.length) {
      const r = j >= b.length || (i < a.length && a[i]!.rank < b[j]!.rank) ? a[i++]! : b[j++]!;
      if (firstMismatch(r.preds, fields) === undefined) return { route: r, target: r.target };
    }
    return null;
  }

  /**
   * The targets some sender's message with these fields could reach: rows are walked in table order and
   * the sender is left open, so a row that pins the sender contributes its target and lets later rows
   * still count, while the first row that matches whatever the sender is ends the walk. (Whether a sender
   * glob can match anything at all is not examined: a row that names a sender is taken at its word.)
   */
  targetsForAnySender(fields: Omit<RouteFields, 'sender'>): Target[] {
    const out: Target[] = [];
    for (const r of this.routes) {
      const others = r.preds.filter((p) => p.key !== 'sender');
      if (firstMismatch(others, { ...fields, sender: '' }) !== undefined) continue;
      out.push(r.target);
      if (others.length === r.preds.length) break;
    }
    return out;
  }

  /** Every row's verdict for these fields, in table order; the first `matched` row is the outcome. */
  explain(fields: RouteFields): ExplainLine[] {
    const compiled = new Map<number, Route>(this.routes.map((r) => [r.row.id, r]));
    const invalid = new Map<number, string>(this.invalidRows.map((r) => [r.row.id, r.reason]));
    let decided = false;
    return this.rows.map((row): ExplainLine => {
      const reason = invalid.get(row.id);
      if (reason !== undefined) return { row, verdict: 'invalid', reason };
      const r = compiled.get(row.id)!;
      const miss = firstMismatch(r.preds, fields);
      if (miss) return { row, verdict: 'no-match', key: miss.key, glob: miss.glob, value: fields[miss.key] };
      const target = formatTarget(r.target);
      if (decided) return { row, verdict: 'shadowed', target };
      decided = true;
      return { row, verdict: 'matched', target };
    });
  }

  /** Rows that never match, and rows whose impulse_config fell back to the defaults, by id. */
  problems(): RouteProblem[] {
    const out: RouteProblem[] = this.invalidRows.map((r) => ({ id: r.row.id, reason: r.reason }));
    for (const r of this.routes) {
      if (r.impulseError) out.push({ id: r.row.id, reason: `${r.impulseError} (defaults used)` });
    }
    return out.sort((x, y) => x.id - y.id);
  }
}

/** The key most routes pin to a literal value, if pinning it narrows the search at all. */
function chooseIndexKey(routes: readonly Route[]): MatchKey | undefined {
  let best: MatchKey | undefined;
  let bestCount = 1;
  for (const key of MATCH_KEYS) {
    const values = new Set<string>();
    for (const r of routes) {
      const lit = r.preds.find((p) => p.key === key)?.literal;
      if (lit !== undefined) values.add(lit);
    }
    // Distinct values matter: 100 routes all on platform=telegram narrow nothing.
    if (values.size > bestCount) {
      best = key;
      bestCount = values.size;
    }
  }
  return best;
}

/** Compiles rows into a RouteTable. */
export function compileRoutes(rows: readonly RouteRow[]): RouteTable {
  return new RouteTable(rows);
}
