import type { Db } from '../store/db.js';
import { burst } from './pipeline.js';

/**
 * How the burst's cost grows (bench/README.md, scenario 11): the same total of messages spread over 100,
 * 1,000 and 10,000 groups (fewer messages per group as the groups grow, so every row costs the same work and
 * what grows is what depends on the number of groups: runs, lanes, sessions), then the 1,000-group burst
 * again with 1,000,000 answered messages already stored (the size of the tables and their indexes). Each
 * row: wall, gated's CPU and its CPU per message. `quick`: a tenth of every number.
 */

/** One row of the scaling table. */
export interface ScalingRow {
  groups: number;
  perGroup: number;
  storedBefore: number;
  sent: number;
  lost: number;
  duplicates: number;
  runs: number;
  wallSeconds: number;
  gatedCpuSeconds: number;
  cpuUsPerMessage: number;
  eventLoopDelayP99ms: number;
}

/**
 * A history of `rows` messages as a gateway that ran a while leaves it: half inbound and answered, half
 * its delivered replies, spread over the bench's chats, with the poll cursor after them.
 */
export function storedHistory(rows: number, groups: number): (db: Db) => void {
  return (db) => {
    const fill = db.prepare(
      `INSERT INTO messages (chat_jid, sender, content, is_from_me, state, delivery, group_folder, session_topic)
       VALUES (?, 'bench', 'stored message', ?, ?, ?, ?, '')`,
    );
    db.transaction(() => {
      for (let i = 0; i < rows; i++) {
        const g = Math.floor(i / 2) % groups;
        const out = i % 2;
        fill.run(`bench:g${g}`, out, out ? null : 'done', out ? 'sent' : null, `b/g${g}`);
      }
    })();
    const last = db.prepare('SELECT max(id) FROM messages').pluck().get() as number;
    db.prepare(`INSERT OR REPLACE INTO router_state (key, value) VALUES ('poll_cursor', ?)`).run(
      String(last),
    );
    db.pragma('optimize');
  };
}

/** The bursts of the scaling table, one after the other. */
export async function scaling(quick: boolean): Promise<ScalingRow[]> {
  // --quick: a tenth of everything (each group costs at least one run, an agent's spawn).
  const scale = quick ? 10 : 1;
  const total = 100_000 / scale;
  const stored = 1_000_000 / scale;
  const timeout = quick ? 300_000 : 900_000;
  const cases = [
    { groups: 100 / scale, stored: 0 },
    { groups: 1000 / scale, stored: 0 },
    { groups: 10_000 / scale, stored: 0 },
    { groups: 1000 / scale, stored },
  ];
  const rows: ScalingRow[] = [];
  for (const c of cases) {
    const perGroup = total / c.groups;
    const prefill = c.stored ? storedHistory(c.stored, c.groups) : undefined;
    const r = await burst(c.groups, perGroup, timeout, undefined, prefill);
    rows.push({
      groups: c.groups,
      perGroup,
      storedBefore: c.stored,
      sent: r.sent,
      lost: r.lost,
      duplicates: r.duplicates,
      runs: r.runs,
      wallSeconds: r.wallSeconds,
      gatedCpuSeconds: r.gatedCpuSeconds,
      cpuUsPerMessage: Math.round((r.gatedCpuSeconds * 1e6) / r.sent),
      eventLoopDelayP99ms: r.eventLoopDelayP99ms,
    });
  }
  return rows;
}
