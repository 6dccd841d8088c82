import { describe, expect, it } from 'vitest';
import { Queries } from '../../http/queries.js';
import { insertOutbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';

describe('dashboard queries', () => {
  it('lists undelivered replies newest first from the outbox and failed indexes, not a read of the table', () => {
    const { db } = freshDb();
    const reply = (content: string) => insertOutbound(db, { chat_jid: 'web:a', content, kind: 'reply' });
    db.transaction(() => {
      for (let i = 0; i < 500; i++) reply(`sent ${i}`);
      db.prepare(`UPDATE messages SET delivery = 'sent'`).run();
    })();
    const failed = reply('given up');
    db.prepare(`UPDATE messages SET delivery = 'failed', delivery_error = 'refused' WHERE id = ?`).run(
      failed,
    );
    const pending = [reply('waiting 1'), reply('waiting 2')];
    const q = new Queries(db);

    expect(q.outbox(10).map((o) => [o.id, o.delivery, o.preview])).toEqual([
      [pending[1], 'pending', 'waiting 2'],
      [pending[0], 'pending', 'waiting 1'],
      [failed, 'failed', 'given up'],
    ]);
    expect(q.outbox(1).map((o) => o.id)).toEqual([pending[1]]);
    const plan = (
      db.prepare(`EXPLAIN QUERY PLAN ${q['s'].outbox.source}`).all(10) as { detail: string }[]
    ).map((r) => r.detail);
    expect(plan).toContain('SCAN messages USING INDEX idx_messages_outbox');
    expect(plan).toContain('SCAN messages USING INDEX idx_messages_failed');
    expect(plan).not.toContain('SCAN messages');
  });
});
