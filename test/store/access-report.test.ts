import { describe, expect, it } from 'vitest';
import { accessReport } from '../../store/access-report.js';
import { addGroup } from '../../store/groups.js';
import { freshDb, tempDir } from '../helpers/db.js';

const HOUR = 3_600_000;

describe('access report', () => {
  it('counts each group’s last 24 hours by decision and names this hour’s busiest served sender', () => {
    const { db } = freshDb();
    const groups = tempDir();
    for (const g of ['club', 'lounge', 'quiet']) addGroup(db, groups, g);
    // Half past a whole hour, so "this hour" and "an hour ago" are both inside the last 24 hours.
    const now = Math.floor(Date.now() / HOUR) * HOUR + HOUR / 2;
    const at = (msAgo: number) => new Date(now - msAgo).toISOString();
    const ins = db.prepare(
      `INSERT INTO messages (chat_jid, sender, content, state, group_folder, timestamp) VALUES (?, ?, 'x', ?, ?, ?)`,
    );
    for (let i = 0; i < 3; i++) ins.run('web:club', 'ann', 'done', 'club', at(60_000));
    // Bob's served rows are in two states: 4 in all, more than Ann's 3.
    for (let i = 0; i < 2; i++) ins.run('telegram:-5', 'bob', 'done', 'club', at(60_000));
    for (let i = 0; i < 2; i++) ins.run('telegram:-5', 'bob', 'ready', 'club', at(60_000));
    for (let i = 0; i < 2; i++) ins.run('telegram:-5', 'bob', 'limited', 'club', at(60_000));
    // An hour ago: counted among the decisions, not for this hour's busiest sender.
    for (let i = 0; i < 5; i++) ins.run('telegram:-5', 'cat', 'done', 'club', at(HOUR));
    // Two days ago: not in the report at all.
    ins.run('web:club', 'ann', 'done', 'club', at(48 * HOUR));
    ins.run('web:lounge', 'dan', 'pending', 'lounge', at(60_000));
    ins.run('web:lounge', 'eve', 'denied', 'lounge', at(60_000));
    // An outbound row is not a decision.
    db.prepare(
      `INSERT INTO messages (chat_jid, sender, content, is_from_me, group_folder, timestamp) VALUES ('web:club', 'gated', 'r', 1, 'club', ?)`,
    ).run(at(60_000));

    const rep = accessReport(db, [], now);
    const of = (f: string) => rep.groups.find((g) => g.folder === f)!;
    expect(of('club').decisions).toEqual({ served: 12, denied: 0, pending: 0, limited: 2 });
    expect(of('club').usage.busiestSender).toEqual({ sender: 'telegram:bob', messages: 4 });
    expect(of('lounge').decisions).toEqual({ served: 0, denied: 1, pending: 1, limited: 0 });
    expect(of('lounge').usage.busiestSender).toBeNull();
    expect(of('quiet').decisions).toEqual({ served: 0, denied: 0, pending: 0, limited: 0 });
    expect(accessReport(db, [], now, 'lounge').groups.map((g) => g.folder)).toEqual(['lounge']);
  });
});
