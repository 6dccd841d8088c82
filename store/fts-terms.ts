import type { Db } from './db.js';

/**
 * How common the words of a query are in one FTS5 index (docs/MEMORY.md): a search ranks only by the
 * words few rows have. FTS5's bm25 walks the whole list of rows of every word of the expression to weigh
 * it, so one word in half of a million rows costs more than all the rest of a search, and tells no row
 * apart anyway. A word is counted only up to the limit of "common" (a MATCH of that word alone with a
 * LIMIT: a walk of at most that many rows; a vocabulary table would walk all of them), and counts are kept
 * per connection, counted again once the index has grown by a tenth: a count only decides how a search
 * looks, never which rows it may read.
 */

/** A word in at most this many rows is always ranked by: ranking that many is cheap. */
export const RARE_ENOUGH = 1000;

/** A token counted by tokenRows is counted up to this many rows at least (a walk of a few ms). */
const TOKEN_CAP = 100_000;

/** Most words whose counts are kept per index; the least used go first. */
const KEPT = 20_000;

/**
 * How to search for a query's words: ranked by the `words` few rows have (bm25, or their IDFs), or, when
 * every word of the query is common (`ranked` false), the newest rows having any of them (nothing to rank
 * by: their lists are walked from the end and the walk stops at the limit).
 */
export interface Telling {
  words: string[];
  ranked: boolean;
  /** Rows each word is in, as counted (a common word counts the limit + 1), in the order of `words`. */
  counts: number[];
  /** Rows the words are in, summed. */
  rows: number;
}

interface Count {
  /** Rows the word is in, exact up to the limit of common, that limit + 1 above it. */
  n: number;
  /** The index's size when counted. */
  total: number;
  /** The count's cap, for a token counted by tokenRows. */
  cap?: number;
}

/** One FTS5 index's word counts, over one connection. */
export class TermCounts {
  private readonly kept = new Map<string, Count>();
  private readonly capped;

  /**
   * `table` is the FTS5 table, `column` the column the words are in, `share` the part of the rows a word
   * is in above which it is common (unless in at most RARE_ENOUGH rows), and `total()` about how many rows
   * the index has (read at each search: keep it cheap).
   */
  constructor(
    db: Db,
    table: string,
    private readonly column: string,
    private readonly share: number,
    private readonly total: () => number,
  ) {
    this.capped = db
      .prepare(`SELECT count(*) FROM (SELECT rowid FROM ${table} WHERE ${table} MATCH ? LIMIT ?)`)
      .pluck();
  }

  /** How to look for `words` (distinct, lower case): the rare ones ranked, else all newest first. */
  telling(words: readonly string[]): Telling {
    const total = Math.max(1, this.total());
    const limit = Math.max(Math.floor(total * this.share), RARE_ENOUGH);
    const found = words.map((w) => ({ w, n: this.count(w, limit, total) })).filter((x) => x.n > 0);
    const rare = found.filter((x) => x.n <= limit);
    const sum = (xs: typeof found) => xs.reduce((a, x) => a + x.n, 0);
    const how = (xs: typeof found, ranked: boolean) => ({
      words: xs.map((x) => x.w),
      ranked,
      counts: xs.map((x) => x.n),
      rows: sum(xs),
    });
    return rare.length > 0 || found.length === 0 ? how(rare, true) : how(found, false);
  }

  /**
   * Rows the token `token` of column `column` is in, at least `cap` when there are that many (counted up to
   * `cap` or a walk of a few ms, whichever is more, and given as counted), kept like a word's count: how
   * long a search naming it inside the MATCH walks, and about how much of the index it is.
   */
  tokenRows(column: string, token: string, cap: number): number {
    const key = `${column}:${token}`;
    const total = Math.max(1, this.total());
    const had = this.kept.get(key);
    this.kept.delete(key);
    const kept = had !== undefined && total <= had.total * 1.1 + 100;
    if (kept && had.cap !== undefined && (had.n < had.cap || had.cap >= cap)) {
      this.kept.set(key, had);
      return had.n;
    }
    // Counted once well past the cap asked for, so that the next searches' caps are within it.
    const upTo = Math.max(cap, TOKEN_CAP);
    const n = Number(this.capped.get(`${column}:"${token}"`, upTo));
    this.kept.set(key, { n, total, cap: upTo });
    if (this.kept.size > KEPT) this.kept.delete(this.kept.keys().next().value!);
    return n;
  }

  private count(word: string, limit: number, total: number): number {
    const had = this.kept.get(word);
    this.kept.delete(word);
    if (had !== undefined && had.cap === undefined && total <= had.total * 1.1 + 100) {
      // Still about right; used again, so kept longest.
      this.kept.set(word, had);
      return had.n;
    }
    const n = Number(this.capped.get(`${this.column}:"${word}"`, limit + 1));
    // A word no row has is counted again next time: the next row may have it.
    if (n === 0) return 0;
    this.kept.set(word, { n, total });
    if (this.kept.size > KEPT) this.kept.delete(this.kept.keys().next().value!);
    return n;
  }
}

const perDb = new WeakMap<Db, Map<string, TermCounts>>();

/** The one TermCounts of `table` on this connection (made on first use). */
export function termCountsOf(db: Db, table: string, make: () => TermCounts): TermCounts {
  let byTable = perDb.get(db);
  if (byTable === undefined) perDb.set(db, (byTable = new Map()));
  let t = byTable.get(table);
  if (t === undefined) byTable.set(table, (t = make()));
  return t;
}
