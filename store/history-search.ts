import type { Db } from './db.js';
import type { TermCounts, Telling } from './fts-terms.js';
import { anyOf, ftsToken, queryWords } from './memory.js';

/**
 * Searching the history index (docs/MEMORY.md, "History"). No bm25: FTS5's bm25 walks the whole list of
 * every token of the expression to weigh it (the group's, the sender's) and reads each matching row's size,
 * about 2 µs a row, so a search cost what the whole index held of its words. Instead each telling word is
 * looked up on its own (its rows' ids only, which FTS5 gives without weighing anything) and a row scores
 * the IDFs of the words it has, summed, newest first among equals: chat messages are short, a word is in a
 * message once, and the rarer words a row shares with the query say most of how well it matches.
 */

/** One message found by a history search. */
export interface HistoryHit {
  id: number;
  chat_jid: string;
  sender: string;
  sender_name: string | null;
  content: string;
  timestamp: string;
  is_from_me: number;
  topic: string;
  /** Lower is better, as SQLite's bm25 gives it: minus the IDFs summed (0 when every word is common). */
  score: number;
}

/**
 * Who may see what of a group's history: every served row (`senders` null: each sender of the search may
 * reach the group), or only the rows of these senders and the answers to them (a sender who may not reach
 * the group sees no more than its own words, as the web chat shows it, http/chat-view.ts).
 */
export interface HistoryScope {
  group: string;
  /** Principal ids (`platform:id`) whose own rows alone are visible, or null for every served row. */
  only: readonly string[] | null;
}

/**
 * How a search looks for its query. The group is named inside each word's MATCH (FTS5 then steps through
 * the group's list only where the word's rows are), unless the group holds so much of the index that the
 * rows to check for it, about `limit / share`, are far fewer than the words find (one group holding
 * most of the history: stepping through its list costs about as much as every row of the words, and nearly
 * every row the words find is the group's anyway). It is then checked on each row, best first, by the
 * indexer's own rule, until `limit` are found.
 */
export interface SearchPlan {
  how: Telling;
  groupOnRow: boolean;
  /** The group's share of the indexed rows, at least (counted up to what decides the plan). */
  share: number;
}

/** A found row as read back, before it is checked for the group and the state. */
interface Row extends HistoryHit {
  state: string | null;
  g: string | null;
}

/** Searches over one connection's history index; `total()` is about how many rows it holds. */
export class HistorySearch {
  private readonly s;

  constructor(
    db: Db,
    private readonly terms: () => TermCounts,
    private readonly total: () => number,
  ) {
    this.s = {
      ids: db.prepare<[string], number>('SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?').pluck(),
      newest: db
        .prepare<[string, number], number>(
          'SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid DESC LIMIT ?',
        )
        .pluck(),
      // In the order given; `g` the group as the indexer chose it (the row's, or that of the message it answers).
      read: db.prepare<[string], Row>(
        `SELECT m.id, m.chat_jid, m.sender, m.sender_name, m.content, m.timestamp, m.is_from_me,
                coalesce(m.session_topic, m.topic) AS topic, 0.0 AS score, m.state,
                coalesce(m.group_folder, r.group_folder) AS g
         FROM json_each(?) j JOIN messages m ON m.id = j.value LEFT JOIN messages r ON r.id = m.reply_to_id
         ORDER BY j.key`,
      ),
    };
  }

  /**
   * The messages of `scope.group` whose text shares words with `query`, best first: inbound rows the group
   * served (never a denied, pending or limited one, unless it is the viewer's own) and the answers, of every
   * chat and topic of the group, never of another group. Rows are read back best first until `limit` are
   * found (at most `limit` × 10 read: a search among many withheld rows may return fewer).
   */
  search(query: string, scope: HistoryScope, limit = 20): HistoryHit[] {
    const plan = this.plan(query, scope, limit);
    if (plan === null) return [];
    const { how } = plan;
    const who = scope.only === null ? '' : `who:${ftsToken('u', scope.only[0]!)} AND `;
    const grp = `grp:${ftsToken('g', scope.group)} AND `;
    if (!how.ranked) {
      // Every word common: nothing to rank by, the newest rows having any, the walk stopped at the limit.
      const ids = this.s.newest.all(`${grp}${who}content:(${anyOf(how.words)})`, limit * 10);
      const newest = ids.map((id): [number, number] => [id, 0]);
      return this.collect(newest[Symbol.iterator](), scope, limit, limit * 10).hits;
    }
    const idfs = how.counts.map((n) => idf(n, this.total()));
    if (plan.groupOnRow) {
      const ranked = bestFirst(
        how.words.map((w) => this.s.ids.all(`${who}content:"${w}"`)),
        idfs,
      );
      // About `limit` / share rows are read for `limit` of the group's; many more is a group rarer among
      // these words than in the index, for which the group inside the MATCH is the cheaper way.
      const most = Math.max(8 * (limit + 5), Math.ceil((2 * limit) / Math.max(plan.share, 0.01)));
      const { hits, short } = this.collect(ranked, scope, limit, most);
      if (!short) return hits;
    }
    const ranked = bestFirst(
      how.words.map((w) => this.s.ids.all(`${grp}${who}content:"${w}"`)),
      idfs,
    );
    return this.collect(ranked, scope, limit, limit * 10).hits;
  }

  /** How a search looks for `query` (null: it finds nothing). */
  plan(query: string, scope: HistoryScope, limit = 20): SearchPlan | null {
    // Only its own rows: the sender is named inside MATCH (two such senders together see nothing).
    if (scope.only !== null && new Set(scope.only).size !== 1) return null;
    const terms = this.terms();
    const how = terms.telling(queryWords(query));
    if (how.words.length === 0) return null;
    const total = Math.max(1, this.total());
    // On the row when the rows to read, about limit / share, are at most a tenth of the words' rows.
    const cap = Math.ceil((10 * limit * total) / Math.max(how.rows, 1)) + 1;
    if (!how.ranked || cap > total) return { how, groupOnRow: false, share: 0 };
    const n = terms.tokenRows('grp', ftsToken('g', scope.group), cap);
    return { how, groupOnRow: n >= cap, share: Math.min(1, n / total) };
  }

  /**
   * The best rows of `ranked` that are the group's and visible, read back in batches (`limit` + 5 rows, then
   * twice as many each time) until `limit` are found or `most` were read (`short`: read out before `limit`).
   */
  private collect(
    ranked: Iterator<[number, number]>,
    scope: HistoryScope,
    limit: number,
    most: number,
  ): { hits: HistoryHit[]; short: boolean } {
    const hits: HistoryHit[] = [];
    let read = 0;
    for (let batch = limit + 5; hits.length < limit && read < most; batch *= 2) {
      const next = take(ranked, Math.min(batch, most - read));
      if (next.length === 0) return { hits, short: false };
      read += next.length;
      hits.push(...this.visible(next, scope, limit - hits.length));
    }
    return { hits, short: hits.length < limit };
  }

  /**
   * Of `found` (ids best first, each with its score), the rows that are the group's by the indexer's rule and
   * visible in `scope`: a served row, an answer, or for a viewer who may not reach the group its own rows and
   * their answers (the MATCH named the sender). At most `limit`.
   */
  private visible(found: readonly [number, number][], scope: HistoryScope, limit: number): HistoryHit[] {
    const out: HistoryHit[] = [];
    const scores = new Map(found);
    // A row deleted since it was indexed is simply not read back.
    for (const r of this.s.read.all(JSON.stringify(found.map((x) => x[0])))) {
      if (r.g !== scope.group) continue;
      if (scope.only === null && r.is_from_me !== 1 && WITHHELD.has(r.state ?? '')) continue;
      const { state: _state, g: _g, ...hit } = r;
      out.push({ ...hit, score: -(scores.get(r.id) ?? 0) });
      if (out.length === limit) break;
    }
    return out;
  }
}

/** Inbound states of rows the group did not serve. */
const WITHHELD = new Set(['denied', 'pending', 'limited']);

/** A word's IDF in an index of `total` rows, as bm25 weighs it (never below a millionth). */
export function idf(rows: number, total: number): number {
  return Math.max(1e-6, Math.log((Math.max(total, rows) - rows + 0.5) / (rows + 0.5)));
}

/**
 * The ids of `lists` (each ascending, as FTS5 gives them), best first: by the IDFs of the lists an id is
 * in, summed, the newest (highest id) first among equals; each with its sum.
 */
export function* bestFirst(
  lists: readonly (readonly number[])[],
  idfs: readonly number[],
): Generator<[number, number]> {
  if (lists.length === 1) {
    const ids = lists[0]!;
    for (let i = ids.length - 1; i >= 0; i--) yield [ids[i]!, idfs[0]!];
    return;
  }
  const score = new Map<number, number>();
  lists.forEach((ids, i) => {
    for (const id of ids) score.set(id, (score.get(id) ?? 0) + idfs[i]!);
  });
  // An id's sum is first made in the list it first appears in, so the ids of one sum come ascending (unless
  // two sets of words happen to sum alike): a bucket is sorted only when it is not already.
  const buckets = new Map<number, { ids: number[]; sorted: boolean }>();
  for (const [id, s] of score) {
    const b = buckets.get(s);
    if (b === undefined) buckets.set(s, { ids: [id], sorted: true });
    else {
      if (id < b.ids[b.ids.length - 1]!) b.sorted = false;
      b.ids.push(id);
    }
  }
  for (const s of [...buckets.keys()].sort((a, b) => b - a)) {
    const b = buckets.get(s)!;
    if (!b.sorted) b.ids.sort((x, y) => x - y);
    for (let i = b.ids.length - 1; i >= 0; i--) yield [b.ids[i]!, s];
  }
}

/** The next `n` of `it`. */
function take<T>(it: Iterator<T>, n: number): T[] {
  const out: T[] = [];
  while (out.length < n) {
    const r = it.next();
    if (r.done === true) break;
    out.push(r.value);
  }
  return out;
}
