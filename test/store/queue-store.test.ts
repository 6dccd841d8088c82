import { describe, expect, it } from 'vitest';
import { QueueStore } from '../../store/queue.js';
import { freshDb } from '../helpers/db.js';
import { countSql } from '../../bench/sql-count.js';
import { ready } from '../queue/helpers.js';

/** The queue's statements on a real file: what a dispatch takes, and what a pump's reads cost. */
describe('QueueStore', () => {
  it('takes the chat of the oldest eligible row: an older row in a backoff does not choose the chat', () => {
    const { db } = freshDb();
    const store = new QueueStore(db);
    const key = { group: 'g1', topic: '' };
    const waiting = ready(db, { chat: 'tg:A' });
    const b1 = ready(db, { chat: 'tg:B' });
    const a2 = ready(db, { chat: 'tg:A' });
    db.prepare('UPDATE messages SET not_before = 5000 WHERE id = ?').run(waiting);
    const d = store.dispatch(key, 1000)!;
    expect(d.chatJid).toBe('tg:B');
    expect(d.rows.map((r) => r.id)).toEqual([b1]);
    // Once the backoff has passed, chat A's rows (the older one first) go together.
    const next = store.dispatch(key, 6000)!;
    expect(next.chatJid).toBe('tg:A');
    expect(next.rows.map((r) => r.id)).toEqual([waiting, a2]);
    expect(store.dispatch(key, 6000)).toBeNull();
  });

  it('reads follow-ups and finds no notes without opening a transaction; notes are still taken once', () => {
    const { db } = freshDb();
    const store = new QueueStore(db);
    const key = { group: 'g1', topic: '' };
    const id = ready(db, { chat: 'tg:A', content: 'x'.repeat(10) });
    const sql = countSql();
    try {
      expect(store.followUps(key, 'tg:A', 1000).map((r) => r.id)).toEqual([id]);
      expect(store.takeNotes(key, 1000)).toEqual([]);
      expect(sql.control()).toBe(0);
      expect(sql.total()).toBe(2);
    } finally {
      sql.stop();
    }
    db.prepare(`INSERT INTO system_messages (group_folder, topic, content) VALUES ('g1', '', 'n1')`).run();
    expect(store.takeNotes(key, 1000).map((n) => n.content)).toEqual(['n1']);
    expect(store.takeNotes(key, 1000)).toEqual([]);
  });

  it('a follow-up row that cannot be handed to an agent ends failed alone; the others are cut to the bound', () => {
    const { db } = freshDb();
    const store = new QueueStore(db, 16);
    const key = { group: 'g1', topic: '' };
    const good = ready(db, { chat: 'tg:A', content: 'y'.repeat(100) });
    const bad = ready(db, { chat: 'tg:A' });
    db.pragma('ignore_check_constraints = ON');
    db.prepare('UPDATE messages SET sender = ? WHERE id = ?').run(Buffer.from('blob'), bad);
    const rows = store.followUps(key, 'tg:A', 1000);
    expect(rows.map((r) => r.id)).toEqual([good]);
    expect(Buffer.byteLength(rows[0]!.content)).toBeLessThanOrEqual(16);
    expect(db.prepare('SELECT state FROM messages WHERE id = ?').pluck().get(bad)).toBe('failed');
  });

  it('follow-ups without a bad row are read plainly and still cut to the bound', () => {
    const { db } = freshDb();
    const store = new QueueStore(db, 1024);
    const key = { group: 'g1', topic: '' };
    const long = ready(db, { chat: 'tg:A', content: 'é'.repeat(1000) });
    const short = ready(db, { chat: 'tg:A', content: 'hi' });
    const rows = store.followUps(key, 'tg:A', 1000);
    expect(rows.map((r) => r.id)).toEqual([long, short]);
    expect(Buffer.byteLength(rows[0]!.content)).toBeLessThanOrEqual(1024);
    expect(rows[0]!.content).toMatch(/^é{400,}\n\[… \d+ bytes in all, cut to 1024\]$/);
    expect(rows[1]!.content).toBe('hi');
    // The row keeps all of it.
    expect(db.prepare('SELECT length(content) FROM messages WHERE id = ?').pluck().get(long)).toBe(1000);
  });
});
