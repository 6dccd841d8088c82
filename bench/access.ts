import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Message } from '../core/types.js';
import { AccessGate } from '../gateway/access.js';
import { AccessSource, setLimits, upsertMember } from '../store/access.js';
import { openDatabase } from '../store/db.js';

/** One row of the access scenario: what was decided, and what one decision cost. */
export type AccessCost = {
  case: string;
  verdict: string;
  decisions: number;
  perDecisionUs: number;
};

/**
 * The cost of the access decision per routed message (docs/ACCESS.md), on a real database, for the cases a
 * poll batch meets: an open group (the default: one map lookup), a members group with 100 member globs
 * (a member, and a stranger who is denied), an approval group whose stranger already holds a code (one
 * indexed read), and a group with a messages-per-sender limit over `stored` served rows of that sender
 * (one indexed count of the current hour; a sender under a limit of N has at most N such rows). Each case
 * runs for `budgetMs` after a warm-up, inside one transaction as the pipeline does.
 */
export function benchAccess(budgetMs: number, stored = 59): AccessCost[] {
  const dir = mkdtempSync(join(tmpdir(), 'gated-bench-access-'));
  try {
    const db = openDatabase(join(dir, 'gated.db'));
    const add = db.prepare('INSERT INTO registered_groups (folder, access) VALUES (?, ?)');
    add.run('open', 'open');
    add.run('club', 'members');
    add.run('door', 'approval');
    add.run('capped', 'open');
    for (let i = 0; i < 100; i++) upsertMember(db, 'club', `telegram:${1000 + i}`, 'member');
    upsertMember(db, 'club', 'discord:*', 'member');
    setLimits(db, 'capped', { senderPerHour: stored + 1, runsPerDay: null, costPerDayUsd: null });
    const now = Date.now();
    const fill = db.prepare(
      `INSERT INTO messages (chat_jid, sender, content, state, group_folder, session_topic, timestamp)
       VALUES ('telegram:-1', '42', 'x', 'done', 'capped', '', ?)`,
    );
    db.transaction(() => {
      for (let i = 0; i < stored; i++) fill.run(new Date(now - (i % 1800) * 1000).toISOString());
    })();
    const gate = new AccessGate(db, new AccessSource(db, ['telegram:1']));
    const msg = (sender: string, chat = 'telegram:-1'): Message => ({
      id: 1,
      chat_jid: chat,
      sender,
      sender_name: null,
      content: 'hello',
      verb: 'message',
      topic: '',
      platform_msg_id: null,
      reply_to: null,
      timestamp: new Date(now).toISOString(),
      is_from_me: 0,
    });
    // The stranger's code exists before timing starts: the timed path is the lookup, not the insert.
    db.transaction(() => gate.decide(msg('777'), 'door', now))();
    const cases: Array<[string, Message, string]> = [
      ['open group', msg('42'), 'open'],
      ['members group, 101 globs: a member (last row)', msg('55', 'discord:9'), 'club'],
      ['members group, 101 globs: a stranger', msg('999'), 'club'],
      ['approval group: stranger holding a code', msg('777'), 'door'],
      [`limit ${stored + 1}/sender/hour: sender with ${stored} served rows`, msg('42'), 'capped'],
    ];
    const out: AccessCost[] = [];
    for (const [name, m, folder] of cases) {
      let verdict = '';
      // As the pipeline does: the rules are read once per poll batch.
      gate.beginBatch();
      db.transaction(() => {
        for (let i = 0; i < 200; i++) verdict = gate.decide(m, folder, now).state;
      })();
      let runs = 0;
      const t0 = process.hrtime.bigint();
      const end = t0 + BigInt(budgetMs) * 1_000_000n;
      db.transaction(() => {
        // Checking the clock every 100 decisions keeps its cost out of the figure.
        do {
          for (let i = 0; i < 100; i++) gate.decide(m, folder, now);
          runs += 100;
        } while (process.hrtime.bigint() < end);
      })();
      const us = Number(process.hrtime.bigint() - t0) / 1000 / runs;
      gate.endBatch();
      out.push({ case: name, verdict, decisions: runs, perDecisionUs: Number(us.toFixed(3)) });
    }
    db.close();
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
