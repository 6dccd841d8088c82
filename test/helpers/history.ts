import type { Db } from '../../store/db.js';
import { HistoryIndex } from '../../store/history-index.js';
import { insertMessage } from './db.js';

/**
 * The history index of `db` with the rows its tests write (docs/MEMORY.md, "History"): inbound rows as the
 * poll loop left them (served, `done`, unless told), answers to them, and the ids a search finds.
 */
export function historyOf(db: Db) {
  const index = new HistoryIndex(db);
  return {
    index,
    /** An inbound row of `group` in `chat` (`state` done unless given); its id. */
    said: (group: string, sender: string, content: string, more: Record<string, unknown> = {}) =>
      insertMessage(db, {
        chat_jid: 'telegram:-1',
        state: 'done',
        group_folder: group,
        sender,
        content,
        ...more,
      }),
    /** The answer to row `to`, in its chat; its id. */
    answered: (to: number, content: string) =>
      insertMessage(db, {
        chat_jid: db.prepare('SELECT chat_jid FROM messages WHERE id = ?').pluck().get(to),
        is_from_me: 1,
        content,
        reply_to_id: to,
      }),
    /** Indexes every row the indexer may take. */
    indexAll: () => {
      while (index.indexNext().more);
    },
    /** The ids a search of `group` for `query` finds, as `only` may see them, best first. */
    ids: (query: string, group: string, only: readonly string[] | null = null, limit?: number) =>
      index.search(query, { group, only }, limit).map((x) => x.id),
  };
}
