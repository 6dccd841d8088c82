import type { Db } from './db.js';
import { termCountsOf, TermCounts, type Telling } from './fts-terms.js';

/**
 * Memory (docs/MEMORY.md): the facts kept about a group, or about one sender of it, beyond any session. One
 * `memories` row per fact, its full-text index (memories_fts) kept by triggers. A search names its group
 * inside the MATCH, so another group's facts are never even walked (a group keeps at most
 * GATED_MEMORY_MAX_FACTS), and the scopes it may read on the row: a scope's token is shared by every group
 * (`group` by most facts of all), and weighing it would cost more than the rest of the search.
 */

/** A fact's scope that every turn of its group may read. */
export const GROUP_SCOPE = 'group';

/** Where a fact came from: the turn and the senders (with their roles) that led to it, or an operator. */
export interface Provenance {
  run?: number;
  turn?: number;
  chat?: string;
  senders?: { sender: string; role: string }[];
  /** Who added it when no turn did (`cli:<user>`, `dashboard`). */
  by?: string;
}

/** One stored fact. */
export interface Fact {
  id: number;
  group_folder: string;
  scope: string;
  text: string;
  provenance: string;
  created_at: string;
  updated_at: string;
  actor: string;
}

/** A fact found by a search, with its bm25 score (lower is better, as SQLite gives it). */
export interface FoundFact extends Fact {
  score: number;
}

/** The bounds on what is kept (GATED_MEMORY_MAX_FACTS, GATED_MEMORY_MAX_FACT_BYTES). */
export interface MemoryBounds {
  maxFacts: number;
  maxFactBytes: number;
}

/** docs/MEMORY.md's defaults: 1,000 facts a group, 2,048 bytes a fact. */
export const DEFAULT_MEMORY_BOUNDS: MemoryBounds = { maxFacts: 1000, maxFactBytes: 2048 };

/** Why a fact was not stored: `memory_full` (the group keeps its maximum), `fact_too_long`, `fact_empty`. */
export class MemoryRefused extends Error {
  override readonly name = 'MemoryRefused';
  constructor(
    readonly reason: 'memory_full' | 'fact_too_long' | 'fact_empty',
    message: string,
  ) {
    super(message);
  }
}

/** The FTS5 token naming a group (or a scope): one run of hex digits, which no tokenizer splits. */
export function ftsToken(prefix: 'g' | 's' | 'u', value: string): string {
  return prefix + Buffer.from(value, 'utf8').toString('hex').toUpperCase();
}

/** Most words of a query a search looks for; more would only slow it. */
const MAX_QUERY_WORDS = 32;

/**
 * Words that say nothing about what a text is about (English function words): a turn that shares only these
 * with a fact does not make it relevant.
 */
const STOP_WORDS = new Set(
  (
    'a an and are as at be been but by can could did do does for from had has have he her his how i if in ' +
    'into is it its me my no not of on or our she so than that the their them then there these they this ' +
    'to us was we were what when where which who why will with would you your'
  ).split(' '),
);

/** The distinct words of free text a search looks for (lower case, no stop words, at most 32). */
export function queryWords(text: string): string[] {
  const seen = new Set<string>();
  for (const m of text.toLowerCase().matchAll(/[\p{L}\p{N}]+/gu)) {
    if ((m[0].length < 2 && !/\p{N}/u.test(m[0])) || STOP_WORDS.has(m[0])) continue;
    seen.add(m[0]);
    if (seen.size >= MAX_QUERY_WORDS) break;
  }
  return [...seen];
}

/** Words as an FTS5 expression matching any of them (each quoted: only letters and digits), or null. */
export function anyOf(words: readonly string[]): string | null {
  return words.length === 0 ? null : words.map((w) => `"${w}"`).join(' OR ');
}

/** What to remember. */
export interface NewFact {
  group: string;
  /** GROUP_SCOPE or a sender as `platform:id`. */
  scope: string;
  text: string;
  provenance: Provenance;
  actor: string;
}

/** What a recall may read: its group, and the senders whose own facts it may see beside the group's. */
export interface RecallScope {
  group: string;
  senders: readonly string[];
  /** Also the group's facts (scope 'group'). Default true. */
  groupFacts?: boolean;
}

/** The memory of every group, over one connection. */
export class MemoryStore {
  private readonly s;

  constructor(
    private readonly db: Db,
    private readonly bounds: MemoryBounds = DEFAULT_MEMORY_BOUNDS,
  ) {
    this.s = {
      count: db.prepare('SELECT count(*) FROM memories WHERE group_folder = ?').pluck(),
      any: db.prepare('SELECT 1 FROM memories WHERE group_folder = ? LIMIT 1').pluck(),
      same: db.prepare('SELECT id FROM memories WHERE group_folder = ? AND scope = ? AND text = ?').pluck(),
      insert: db.prepare(
        `INSERT INTO memories (group_folder, scope, text, provenance, actor) VALUES (?, ?, ?, ?, ?)`,
      ),
      touch: db.prepare(
        `UPDATE memories SET updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), provenance = ?, actor = ?
         WHERE id = ?`,
      ),
      get: db.prepare('SELECT * FROM memories WHERE id = ?'),
      del: db.prepare('DELETE FROM memories WHERE id = ?'),
      list: db.prepare('SELECT * FROM memories WHERE group_folder = ? ORDER BY id LIMIT ?'),
      listScope: db.prepare(
        'SELECT * FROM memories WHERE group_folder = ? AND scope = ? ORDER BY id LIMIT ?',
      ),
      delScope: db.prepare('DELETE FROM memories WHERE group_folder = ? AND scope = ?'),
      // Ranked by the telling words, or the newest first when every word is common (store/fts-terms.ts).
      search: facts(db, true, false),
      newest: facts(db, false, false),
      recall: facts(db, true, true),
      recallNewest: facts(db, false, true),
      size: db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'memories'").pluck(),
    };
  }

  /**
   * Stores a fact and returns its id; the same text in the same scope again only refreshes that row's
   * provenance and time. Refuses (MemoryRefused) an empty or oversized fact, or one past the group's bound.
   */
  remember(f: NewFact): { id: number; created: boolean } {
    const text = f.text.trim();
    if (text === '') throw new MemoryRefused('fact_empty', 'a fact needs some text');
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > this.bounds.maxFactBytes)
      throw new MemoryRefused(
        'fact_too_long',
        `a fact is at most ${this.bounds.maxFactBytes} bytes (this one has ${bytes})`,
      );
    const provenance = JSON.stringify(f.provenance);
    return this.db.transaction(() => {
      const had = this.s.same.get(f.group, f.scope, text) as number | undefined;
      if (had !== undefined) {
        this.s.touch.run(provenance, f.actor, had);
        return { id: had, created: false };
      }
      const n = this.s.count.get(f.group) as number;
      if (n >= this.bounds.maxFacts)
        throw new MemoryRefused(
          'memory_full',
          `group '${f.group}' keeps at most ${this.bounds.maxFacts} facts: forget some first`,
        );
      const id = Number(this.s.insert.run(f.group, f.scope, text, provenance, f.actor).lastInsertRowid);
      return { id, created: true };
    })();
  }

  /** The fact with this id, or undefined. */
  get(id: number): Fact | undefined {
    return this.s.get.get(id) as Fact | undefined;
  }

  /** Deletes one fact; true when it existed. */
  forget(id: number): boolean {
    return this.s.del.run(id).changes > 0;
  }

  /** Deletes every fact of one scope of a group; returns how many. */
  forgetScope(group: string, scope: string): number {
    return this.s.delScope.run(group, scope).changes;
  }

  /** A group's facts in the order they were made, all scopes or one. */
  list(group: string, scope?: string, limit = 500): Fact[] {
    return (
      scope === undefined ? this.s.list.all(group, limit) : this.s.listScope.all(group, scope, limit)
    ) as Fact[];
  }

  /** Whether the group has any fact (of its own or of one of its senders): most have none. */
  hasFacts(group: string): boolean {
    return this.s.any.get(group) !== undefined;
  }

  /**
   * The facts of `scope.group` that share words with `query`, best first (bm25 over the words few facts
   * have; the newest first when every word is common), among the group's facts and those of
   * `scope.senders`. An empty query, or one of no words, finds nothing.
   */
  recall(query: string, scope: RecallScope, limit = 10): FoundFact[] {
    const scopes = [...new Set([...(scope.groupFacts === false ? [] : [GROUP_SCOPE]), ...scope.senders])];
    if (scopes.length === 0) return [];
    const how = this.terms().telling(queryWords(query));
    const match = factsMatch(scope.group, how);
    if (match === null) return [];
    return (how.ranked ? this.s.recall : this.s.recallNewest).all(
      match,
      scope.group,
      JSON.stringify(scopes),
      limit,
    ) as FoundFact[];
  }

  /** Every fact of a group matching `query` whatever its scope (the operator's search). */
  search(group: string, query: string, limit = 50): FoundFact[] {
    const how = this.terms().telling(queryWords(query));
    const match = factsMatch(group, how);
    if (match === null) return [];
    return (how.ranked ? this.s.search : this.s.newest).all(match, group, limit) as FoundFact[];
  }

  /** How common each word is among the facts (the last id standing for their number). */
  private terms(): TermCounts {
    return termCountsOf(
      this.db,
      'memories_fts',
      () => new TermCounts(this.db, 'memories_fts', 'text', 0.01, () => Number(this.s.size.get() ?? 0)),
    );
  }
}

/** The MATCH of a group's facts having any of the words, or null when there is none. */
function factsMatch(group: string, how: Telling): string | null {
  const words = anyOf(how.words);
  return words === null ? null : `grp:${ftsToken('g', group)} AND text:(${words})`;
}

/**
 * A search of facts: the MATCH names the group (a group's token is in at most its GATED_MEMORY_MAX_FACTS
 * rows), the row is checked for it again and for the scopes read (`scoped`: a JSON array); `ranked` by bm25
 * over the text, else newest first with the score 0.
 */
function facts(db: Db, ranked: boolean, scoped: boolean) {
  return db.prepare(
    `SELECT m.*, ${ranked ? 'bm25(memories_fts, 1.0, 0.0, 0.0)' : '0.0'} AS score
     FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid
     WHERE memories_fts MATCH ? AND m.group_folder = ?
       ${scoped ? 'AND m.scope IN (SELECT value FROM json_each(?))' : ''}
     ORDER BY ${ranked ? 'score' : 'memories_fts.rowid DESC'} LIMIT ?`,
  );
}
