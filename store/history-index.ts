import type { Logger } from '../core/log.js';
import { createWorker, type Worker } from '../core/worker.js';
import type { Db } from './db.js';
import { whenWritable } from './group-commit.js';
import { termCountsOf, TermCounts, type Telling } from './fts-terms.js';
import { anyOf, ftsToken, queryWords } from './memory.js';
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
      // Ranked by the telling words, or the newest first when every word is common (store/fts-terms.ts).
      served: found(db, true, true),
      servedNewest: found(db, false, true),
      own: found(db, true, false),
      ownNewest: found(db, false, false),
      servedOnRow: foundOnRow(db, true),
      ownOnRow: foundOnRow(db, false),
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

  /** How common each word is in the index (the cursor standing for its size). */
  private terms(): TermCounts {
    return termCountsOf(
      this.db,
      'messages_fts',
      () => new TermCounts(this.db, 'messages_fts', 'content', 0.01, () => this.cursor()),
    );
  }

  /**
   * The messages of `scope.group` whose text shares words with `query`, best first (bm25): inbound rows the
   * group served (never a denied, pending or limited one, unless it is the viewer's own) and the answers,
   * of every chat and topic of the group, never of another group. The best `limit` × 3 by the index are
   * read and filtered, so a search over many withheld rows may return fewer than `limit`.
   */
  search(query: string, scope: HistoryScope, limit = 20): HistoryHit[] {
    const plan = this.plan(query, scope);
    if (plan === null) return [];
    const { how, groupOnRow } = plan;
    const words = anyOf(how.words)!;
    const who = scope.only === null ? '' : `who:${ftsToken('u', scope.only[0]!)} AND `;
    const match = `${groupOnRow ? '' : `grp:${ftsToken('g', scope.group)} AND `}${who}content:(${words})`;
    if (groupOnRow) {
      const s = scope.only === null ? this.s.servedOnRow : this.s.ownOnRow;
      return s.all(match, scope.group, limit) as HistoryHit[];
    }
    const s =
      scope.only === null
        ? how.ranked
          ? this.s.served
          : this.s.servedNewest
        : how.ranked
          ? this.s.own
          : this.s.ownNewest;
    return s.all(match, scope.only === null ? limit * 3 : limit, limit) as HistoryHit[];
  }

  /**
   * How a search looks for `query` (null: it finds nothing). The group is named inside the MATCH, unless
   * its token is in over 100 times as many rows as the query's rare words: bm25 would walk all of the
   * group's rows to weigh its token, so the group is then checked on each row the words find instead, by
   * the indexer's rule (the row's group, or that of the message it answers).
   */
  plan(query: string, scope: HistoryScope): { how: Telling; groupOnRow: boolean } | null {
    // Only its own rows: the sender is named inside MATCH (two such senders together see nothing).
    if (scope.only !== null && new Set(scope.only).size !== 1) return null;
    const terms = this.terms();
    const how = terms.telling(queryWords(query));
    if (how.words.length === 0) return null;
    if (!how.ranked) return { how, groupOnRow: false };
    const cap = 100 * Math.max(how.rows, 1) + 1;
    return { how, groupOnRow: terms.tokenRows('grp', ftsToken('g', scope.group), cap) >= cap };
  }
}

/**
 * A history search: the best rows by the index (bm25 over the content when `ranked`, else the newest with
 * the score 0), then read from messages; `served` leaves out the inbound rows the group did not serve.
 */
function found(db: Db, ranked: boolean, served: boolean) {
  return db.prepare(
    `SELECT m.id, m.chat_jid, m.sender, m.sender_name, m.content, m.timestamp, m.is_from_me,
            coalesce(m.session_topic, m.topic) AS topic, f.score
     FROM (SELECT rowid, ${ranked ? 'bm25(messages_fts, 1.0, 0.0, 0.0)' : '0.0'} AS score FROM messages_fts
           WHERE messages_fts MATCH ? ORDER BY ${ranked ? 'score' : 'rowid DESC'} LIMIT ?) f
     JOIN messages m ON m.id = f.rowid
     ${served ? "WHERE m.is_from_me = 1 OR m.state NOT IN ('denied', 'pending', 'limited')" : ''}
     ORDER BY f.score, m.id DESC LIMIT ?`,
  );
}

/**
 * A ranked history search whose MATCH does not name the group: each row the words find is checked for the
 * group as the indexer chose it (its own, or that of the message it answers), and when `served` for the
 * state, before the best `limit` are taken.
 */
function foundOnRow(db: Db, served: boolean) {
  return db.prepare(
    `SELECT m.id, m.chat_jid, m.sender, m.sender_name, m.content, m.timestamp, m.is_from_me,
            coalesce(m.session_topic, m.topic) AS topic, bm25(messages_fts, 1.0, 0.0, 0.0) AS score
     FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
          LEFT JOIN messages r ON r.id = m.reply_to_id
     WHERE messages_fts MATCH ? AND coalesce(m.group_folder, r.group_folder) = ?
       ${served ? "AND (m.is_from_me = 1 OR m.state NOT IN ('denied', 'pending', 'limited'))" : ''}
     ORDER BY score, m.id DESC LIMIT ?`,
  );
}

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
