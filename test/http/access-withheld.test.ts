import type { MiddlewareHandler } from 'hono';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../core/log.js';
import { accessApi } from '../../http/access.js';
import { insertInbound } from '../../store/messages.js';
import { freshDb } from '../helpers/db.js';

describe('access panel: withheld messages', () => {
  it('are read from the pending and limited indexes, not by reading the table backwards', async () => {
    const { db } = freshDb();
    const row = (content: string, state: string) => {
      const id = insertInbound(db, { chat_jid: 'web:a', sender: 'ann', content })!;
      db.prepare(`UPDATE messages SET state = ?, group_folder = 'club' WHERE id = ?`).run(state, id);
      return id;
    };
    const pending = row('may I?', 'pending');
    db.transaction(() => {
      for (let i = 0; i < 300; i++) row(`served ${i}`, 'done');
    })();
    const limited = row('too many', 'limited');
    const prepared: string[] = [];
    const prepare = db.prepare.bind(db);
    db.prepare = ((sql: string) => {
      prepared.push(sql);
      return prepare(sql);
    }) as typeof db.prepare;
    const pass: MiddlewareHandler = async (_c, next) => next();
    const app = accessApi({
      db,
      admins: [],
      auth: { read: pass, admin: pass, noTokenInUrl: pass },
      log: silentLogger(),
      now: () => Date.now(),
    });
    db.prepare = prepare;

    const res = await app.request('/');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { withheld: Array<{ id: number; state: string }> };
    expect(body.withheld.map((w) => [w.id, w.state])).toEqual([
      [limited, 'limited'],
      [pending, 'pending'],
    ]);
    const sql = prepared.find((s) => s.includes('UNION ALL'))!;
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(0) as { detail: string }[]).map(
      (r) => r.detail,
    );
    expect(plan).toContain('SCAN messages USING INDEX idx_messages_pending');
    expect(plan).toContain('SCAN messages USING INDEX idx_messages_limited');
    expect(plan).not.toContain('SCAN messages');
  });
});
