import { coerceError } from '../core/errors.js';
import type { Logger } from '../core/log.js';
import type { AccessSource } from '../store/access.js';
import type { Db } from '../store/db.js';
import { HistoryIndex } from '../store/history-index.js';
import { MemoryStore } from '../store/memory.js';
import { principalId, principalOf } from '../store/principal.js';
import type { BatchRow } from '../store/queue.js';
import { historyScope, recallScope, type TurnSender } from './actions/memory.js';
import type { MemoryQuery } from './protocol/parser.js';
import type { MemoryFact } from './prompt.js';

/**
 * Memory questions of a run (docs/MEMORY.md): a block's `memory` (`recall`, `search_history`) is answered
 * by one stdin line `{"type":"memory","id",…}` that is not a turn, read within what the turn's senders may
 * see: the group's facts and their own, the group's history as far as each of them may read it.
 */

/** Who may do what with the rows of a turn, as the queue was told (store/access.ts). */
export type MemoryAccess = Pick<AccessSource, 'senderRole'> & Partial<Pick<AccessSource, 'mayReach'>>;

/** The senders of rows of `group`, with the role the agent is told and whether each may reach the group. */
export function turnSenders(
  access: MemoryAccess | undefined,
  group: string,
  rows: readonly BatchRow[],
): TurnSender[] {
  return rows.map((r) => {
    const role = access ? access.senderRole(group, r) : 'member';
    const p = principalOf(r);
    const reaches = role === 'guest' ? (access?.mayReach?.(group, p) ?? false) : true;
    return { sender: role === 'system' ? r.sender : principalId(p), role, reaches };
  });
}

/** Most facts one turn is given, whatever the budget leaves. */
const TURN_FACTS = 20;
/** Most characters of a turn's text the search reads (its words beyond MAX_QUERY_WORDS are not read anyway). */
const TURN_QUERY_CHARS = 4096;

const stores = new WeakMap<Db, MemoryStore>();

/**
 * The facts most relevant to a turn (docs/MEMORY.md): those of the group and of the turn's senders that
 * share words with its messages, best first, as many as fit in `budget` bytes of text. Never throws: a
 * turn without its facts is still a turn.
 */
export function turnMemory(
  db: Db,
  log: Logger,
  access: MemoryAccess | undefined,
  group: string,
  rows: readonly BatchRow[],
  budget: number,
): MemoryFact[] {
  if (budget <= 0 || rows.length === 0) return [];
  try {
    let store = stores.get(db);
    if (!store) stores.set(db, (store = new MemoryStore(db)));
    // A group without facts (most) asks nothing more: no scope, no words counted.
    if (!store.hasFacts(group)) return [];
    const text = rows
      .map((r) => (typeof r.content === 'string' ? r.content : ''))
      .join('\n')
      .slice(0, TURN_QUERY_CHARS);
    const found = store.recall(text, recallScope(group, turnSenders(access, group, rows)), TURN_FACTS);
    const out: MemoryFact[] = [];
    let used = 0;
    for (const f of found) {
      const bytes = Buffer.byteLength(f.text, 'utf8');
      if (used + bytes > budget) continue;
      used += bytes;
      out.push(factOut(f));
    }
    return out;
  } catch (err) {
    log.error({ group, err: coerceError(err).message }, 'reading the turn’s memory failed');
    return [];
  }
}

/** A fact as an agent is given it. */
function factOut(f: {
  id: number;
  text: string;
  scope: string;
  provenance: string;
  updated_at: string;
}): MemoryFact {
  let provenance: unknown = null;
  try {
    provenance = JSON.parse(f.provenance);
  } catch {
    provenance = null;
  }
  return { id: f.id, text: f.text, scope: f.scope, provenance, updated_at: f.updated_at };
}

/** The line that answers a memory question of `group` asked in a turn of `rows`. Never throws. */
export function memoryAnswer(
  db: Db,
  log: Logger,
  access: MemoryAccess | undefined,
  group: string,
  rows: readonly BatchRow[],
  q: MemoryQuery,
): Record<string, unknown> {
  const senders = turnSenders(access, group, rows);
  try {
    if (q.op === 'recall') {
      const facts = new MemoryStore(db).recall(q.query, recallScope(group, senders), q.limit);
      return { type: 'memory', id: q.id, op: q.op, facts: facts.map(factOut) };
    }
    const hits = new HistoryIndex(db).search(q.query, historyScope(group, senders), q.limit);
    return {
      type: 'memory',
      id: q.id,
      op: q.op,
      messages: hits.map((h) => ({
        id: h.id,
        chat_jid: h.chat_jid,
        sender: h.is_from_me === 1 ? 'assistant' : h.sender,
        sender_name: h.sender_name,
        topic: h.topic,
        timestamp: h.timestamp,
        content: h.content.length > 2000 ? h.content.slice(0, 2000) + '…' : h.content,
      })),
    };
  } catch (err) {
    const error = coerceError(err).message;
    log.error({ group, op: q.op, err: error }, 'memory question failed');
    return { type: 'memory', id: q.id, op: q.op, error };
  }
}
