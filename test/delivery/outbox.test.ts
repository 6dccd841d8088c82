import { describe, expect, it } from 'vitest';
import { Outbox } from '../../delivery/outbox.js';
import { insertInbound, insertOutbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';

describe('Outbox', () => {
  it("takes a chat's next reply from the outbox index, not by walking the chat's history", () => {
    const { db } = freshDb();
    db.transaction(() => {
      for (let i = 0; i < 300; i++) {
        const id = insertInbound(db, { chat_jid: 'web:long', sender: 'ann', content: `m${i}` })!;
        insertOutbound(db, { chat_jid: 'web:long', content: `a${i}`, kind: 'reply', reply_to_id: id });
      }
    })();
    db.prepare(`UPDATE messages SET delivery = 'sent' WHERE is_from_me = 1`).run();
    const last = insertOutbound(db, { chat_jid: 'web:long', content: 'pending one', kind: 'reply' });
    const outbox = new Outbox(db);

    expect(outbox.pendingChats()).toEqual(['web:long']);
    expect(outbox.next('web:long')).toMatchObject({ id: last, content: 'pending one', parts_sent: 0 });
    // Without the index named, the planner picks idx_messages_chat (the same leading columns) and reads
    // every row the chat ever had to find its one pending reply.
    const plan = (
      db.prepare(`EXPLAIN QUERY PLAN ${outbox['nextStmt'].source}`).all('web:long') as { detail: string }[]
    ).map((r) => r.detail);
    // Whether it names files is one look in outbound_files' key, not a read of them.
    expect(plan).toEqual([
      'SEARCH messages USING INDEX idx_messages_outbox (chat_jid=?)',
      'CORRELATED SCALAR SUBQUERY 1',
      'SEARCH f USING COVERING INDEX sqlite_autoindex_outbound_files_1 (message_id=?)',
    ]);

    expect(outbox.recordPart(last, 0, 'p1', true)).toBe(true);
    expect(outbox.next('web:long')).toBeUndefined();
    expect(outbox.pendingChats()).toEqual([]);
  });
});
