import type { Logger } from '../core/log.js';
import { createWorker, type Worker } from '../core/worker.js';
import type { Db } from './db.js';
import { whenWritable } from './group-commit.js';
import { termCountsOf, TermCounts } from './fts-terms.js';
import { HistorySearch, type HistoryHit, type HistoryScope, type SearchPlan } from './history-search.js';
import { ftsToken } from './memory.js';
import { StateStore } from './state.js';

/**
 * The full-text index of what was said (docs/MEMORY.md, "History"): messages_fts, filled behind the pipe
 * by the history indexer after its own cursor, so storing, routing and answering a message never write it.
 * A row is indexed under the group its layers chose (an outbound row under the group of the message it
 * answers) once the poll loop has taken it: the indexer stops at the first inbound row not yet polled.
 */

/** router_state key of the indexer's cursor: the id of the last message it looked at. */
export const HISTORY_CURSOR_KEY = 'history_index_cursor';

/** Rows one indexing pass looks at, at most. */
export const INDEX_BATCH = 200;

export type { HistoryHit, HistoryScope } from './history-search.js';

/** Indexing and searching the history of every group, over one connection. */
export class HistoryIndex {
  private readonly s;
  private readonly state: StateStore;

  constructor(private readonly db: Db) {
    this.state = new StateStore(db);
    this.s = {
      rows: db.prepare(
        `SELECT m.id, m.is_from_me, m.state, m.content, coalesce(m.group_folder, r.group_folder) AS g,
                CASE WHEN m.is_from_me = 1 THEN r.chat_jid ELSE m.chat_jid END AS chat,
                CASE WHEN m.is_from_me = 1 THEN r.sender ELSE m.sender END AS sender
         FROM messages m LEFT JOIN messages r ON r.id = m.reply_to_id
         WHERE m.id > ? ORDER BY m.id LIMIT ?`,
      ),
      insert: db.prepare('INSERT INTO messages_fts (rowid, content, grp, who) VALUES (?, ?, ?, ?)'),
      remove: db.prepare('DELETE FROM messages_fts WHERE rowid = ?'),
      lastId: db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").pluck(),
    };
  }

  /** The indexer's cursor (0 before the first pass). */
  cursor(): number {
    return Number(this.state.get(HISTORY_CURSOR_KEY) ?? 0);
  }

  /** True when rows after the cursor may wait for indexing (a read only: an idle pass takes no lock). */
  behind(): boolean {
    return Number(this.s.lastId.get() ?? 0) > this.cursor();
  }

  /**
   * Indexes up to `max` rows after the cursor and moves it, in one transaction; stops at the first inbound
   * row the poll loop has not taken yet (or that waits for its transcript). Returns the rows indexed and
   * whether more may wait.
   */
  indexNext(max = INDEX_BATCH): { indexed: number; more: boolean } {
    return this.db.transaction(() => {
      const from = this.cursor();
      const rows = this.s.rows.all(from, max) as {
        id: number;
        is_from_me: number;
        state: string | null;
        content: unknown;
        g: string | null;
        chat: string | null;
        sender: string | null;
      }[];
      let cursor = from;
      let indexed = 0;
      let stopped = false;
      for (const r of rows) {
        if (r.is_from_me === 0 && (r.state === null || r.state === 'transcribing')) {
          stopped = true;
          break;
        }
        cursor = r.id;
        if (r.g === null || typeof r.content !== 'string' || r.content.trim() === '') continue;
        const colon = r.chat?.indexOf(':') ?? -1;
        const who =
          r.chat && r.sender ? ftsToken('u', `${r.chat.slice(0, colon < 0 ? 0 : colon)}:${r.sender}`) : '';
        this.s.insert.run(r.id, r.content, ftsToken('g', r.g), who);
        indexed += 1;
      }
      if (cursor !== from) this.state.set(HISTORY_CURSOR_KEY, String(cursor));
      return { indexed, more: !stopped && rows.length === max };
    })();
  }

  /** Takes a deleted message out of the index (a retention sweep, an operator's delete). */
  unindex(id: number): void {
    this.s.remove.run(id);
  }

  /** The searches of this connection (made once: their statements are prepared once). */
  private searches(): HistorySearch {
    let found = searchesOf.get(this.db);
    if (found === undefined) {
      const terms = () =>
        termCountsOf(
          this.db,
          'messages_fts',
          () => new TermCounts(this.db, 'messages_fts', 'content', 0.01, () => this.cursor()),
        );
      searchesOf.set(this.db, (found = new HistorySearch(this.db, terms, () => this.cursor())));
    }
    return found;
  }

  /** The messages of `scope.group` whose text shares words with `query`, best first (store/history-search.ts). */
  search(query: string, scope: HistoryScope, limit = 20): HistoryHit[] {
    return this.searches().search(query, scope, limit);
  }

  /** How a search looks for `query` (null: it finds nothing). */
  plan(query: string, scope: HistoryScope, limit = 20): SearchPlan | null {
    return this.searches().plan(query, scope, limit);
  }
}

const searchesOf = new WeakMap<Db, HistorySearch>();

/** How the history indexer runs (gated/app.ts makes it). */
export interface HistoryIndexerOptions {
  db: Db;
  log: Logger;
  /** How often it looks for rows to index when nothing woke it. Default 1 s. */
  intervalMs?: number;
  /** Longest stretch of indexing in one event-loop turn, in ms. Default 8. */
  sliceMs?: number;
}

/**
 * The history indexer: a background worker (core/worker.ts) that indexes messages after its cursor in
 * slices of a few milliseconds, each pass its own transaction, so the message path never waits on the
 * index (bench/memory.ts measures what it costs a burst). Off while nothing is behind: an idle pass reads
 * one value and takes no lock.
 */
export function createHistoryIndexer(opts: HistoryIndexerOptions): Worker {
  const index = new HistoryIndex(opts.db);
  const slice = opts.sliceMs ?? 8;
  const pass = (): number | null => {
    const until = performance.now() + slice;
    let more = true;
    while (more && performance.now() < until) more = index.indexNext().more;
    // Rows left: the next slice once the pipe has had four times as long (a burst keeps the indexer behind;
    // taking every other turn of the loop made the burst's lanes idle out and start again, more runs).
    return more ? Date.now() + 4 * slice : null;
  };
  return createWorker({
    name: 'history-index',
    log: opts.log,
    intervalMs: opts.intervalMs ?? 1000,
    keepAlive: false,
    step: () => (index.behind() ? whenWritable(opts.db, pass) : null),
  });
}
