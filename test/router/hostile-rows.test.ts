import { describe, expect, it } from 'vitest';
import { checkRoute, compileRoutes, type RouteRow } from '../../router/index.js';
import { listRoutes } from '../../store/routes.js';
import { freshDb } from '../helpers/db.js';

const fields = {
  platform: 'telegram',
  room: '😃',
  chat_jid: 'telegram:😃',
  sender: '42',
  verb: 'message',
};

/** Rows as an old database (without the CHECK constraints) stores them when a program writes them. */
function legacyRows(rows: Array<[unknown, unknown, unknown]>): RouteRow[] {
  const { db } = freshDb();
  db.pragma('ignore_check_constraints = ON');
  // An older database has neither the CHECKs nor the audit triggers (whose JSON refuses BLOBs).
  for (const t of db
    .prepare(`SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'audit_routes%'`)
    .pluck()
    .all())
    db.exec(`DROP TRIGGER "${String(t)}"`);
  const ins = db.prepare('INSERT INTO routes (seq, match, target) VALUES (?, ?, ?)');
  for (const r of rows) ins.run(...r);
  return listRoutes(db);
}

describe('route rows written by any program', () => {
  it('a range of emoji compiles and matches instead of failing every tick', () => {
    const table = compileRoutes(legacyRows([[0, 'room=[😀-😎]', 'emoji']]));
    expect(table.problems()).toEqual([]);
    expect(table.resolve(fields)?.target).toEqual({ kind: 'folder', folder: 'emoji' });
  });

  it('a text seq is invalid, and list order, explain and resolution agree', () => {
    const rows = legacyRows([
      ['zzz', '', 'text-seq'],
      [5, 'room=nope', 'five'],
      [1.5, '', 'real-seq'],
      [10, '', 'ten'],
    ]);
    const table = compileRoutes(rows);
    const reasons = new Map(table.problems().map((p) => [p.id, p.reason]));
    expect(reasons.get(rows.find((r) => r.target === 'text-seq')!.id)).toMatch(/seq is not an integer/);
    expect(reasons.get(rows.find((r) => r.target === 'real-seq')!.id)).toMatch(/seq is not an integer/);
    expect(table.resolve(fields)?.target).toEqual({ kind: 'folder', folder: 'ten' });
    // explain walks rows in the same order as SQL's ORDER BY seq, id (routes list).
    expect(table.explain(fields).map((l) => l.row.id)).toEqual(rows.map((r) => r.id));
    expect(
      checkRoute({ seq: 'zzz' as unknown as number, match: '', target: 'x', impulse_config: null }),
    ).toMatch(/seq/);
  });

  it('a BLOB match or target is an invalid row, not a crash', () => {
    const rows = legacyRows([
      [0, Buffer.from('room=x'), 'blob-match'],
      [1, '', Buffer.from('demo')],
      [2, '', 'last'],
    ]);
    const table = compileRoutes(rows);
    expect(table.problems().map((p) => p.reason)).toEqual([
      expect.stringMatching(/match is not text \(a 6-byte blob\)/),
      expect.stringMatching(/target is not text/),
    ]);
    expect(table.resolve(fields)?.target).toEqual({ kind: 'folder', folder: 'last' });
  });

  it('a glob of 10,000 stars is refused with a short reason, and the table still resolves', () => {
    const rows = legacyRows([
      [0, `room=${'x*'.repeat(10_000)}`, 'stars'],
      [1, '', 'last'],
    ]);
    const table = compileRoutes(rows);
    const [problem] = table.problems();
    expect(problem?.reason).toMatch(/more than 16 wildcards|longer than 256/);
    expect(problem!.reason.length).toBeLessThan(200);
    expect(table.resolve({ ...fields, room: 'x'.repeat(5000) })?.target).toEqual({
      kind: 'folder',
      folder: 'last',
    });
  });

  it('new databases refuse wrong-typed route rows at the door', () => {
    const { db } = freshDb();
    expect(() =>
      db.prepare('INSERT INTO routes (seq, match, target) VALUES (?, ?, ?)').run('zzz', '', 'x'),
    ).toThrow(/CHECK constraint failed/);
    expect(() =>
      db.prepare('INSERT INTO messages (chat_jid, content) VALUES (?, ?)').run('web:x', Buffer.from('hi')),
    ).toThrow(/CHECK constraint failed/);
  });
});
