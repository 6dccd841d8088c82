import { existsSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase, type Db } from '../store/db.js';
import { HISTORY_CURSOR_KEY } from '../store/history-index.js';
import { POLL_CURSOR_KEY } from '../store/state.js';
import { burst } from './pipeline.js';

/**
 * How the burst's cost grows (bench/README.md, scenario 11): the same total of messages spread over 100,
 * 1,000 and 10,000 groups (fewer messages per group as the groups grow, so every row costs the same work and
 * what grows is what depends on the number of groups: runs, lanes, sessions), then the 1,000-group burst
 * again with 100,000, 1,000,000 and 10,000,000 answered messages already stored (the size of the tables and
 * their indexes). Each row: wall, gated's CPU, its CPU per message and per run. `quick`: a tenth of every
 * number. /healthz is asked from another process only (burst's `inProcessHealth`): this process's own asks
 * cost its CPU by the second, and the rows differ in wall.
 */

/** One row of the scaling table. */
export interface ScalingRow {
  groups: number;
  perGroup: number;
  storedBefore: number;
  /** Seconds it took to make the stored history (once; later rows copy the file). */
  storedMadeSeconds: number | null;
  sent: number;
  lost: number;
  duplicates: number;
  runs: number;
  wallSeconds: number;
  gatedCpuSeconds: number;
  cpuUsPerMessage: number;
  sqlPerMessage: number;
  eventLoopDelayP99ms: number;
}

/** One burst of the table: `groups` groups sharing `total` messages, with `stored` rows before it. */
export interface ScalingCase {
  groups: number;
  total: number;
  stored: number;
}

/**
 * The rows of a history a gateway that ran a while leaves, written by one statement in one transaction:
 * half inbound and answered, half their delivered replies, spread over the bench's chats, with the poll
 * cursor and the history indexer's cursor after them (a history already indexed: the burst must not index
 * it, only what it brings). Their text is not in the full-text index.
 */
export function storedHistory(rows: number, groups: number): (db: Db) => void {
  return (db) => {
    db.transaction(() => {
      db.prepare(
        `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < @rows)
         INSERT INTO messages (chat_jid, sender, content, is_from_me, state, delivery, group_folder,
                               session_topic)
         SELECT 'bench:g' || ((i / 2) % @groups), 'bench', 'stored message', i % 2,
                CASE i % 2 WHEN 0 THEN 'done' END, CASE i % 2 WHEN 1 THEN 'sent' END,
                'b/g' || ((i / 2) % @groups), ''
         FROM n`,
      ).run({ rows, groups });
      const last = String(db.prepare('SELECT max(id) FROM messages').pluck().get() as number);
      const cursor = db.prepare(`INSERT OR REPLACE INTO router_state (key, value) VALUES (?, ?)`);
      cursor.run(POLL_CURSOR_KEY, last);
      cursor.run(HISTORY_CURSOR_KEY, last);
    })();
    db.pragma('optimize');
  };
}

/**
 * A database file holding `rows` stored messages of `groups` chats (storedHistory) and no groups, made
 * once in the temporary folder and kept for the next runs (`seconds`: how long this call took to make it,
 * 0 when it was there).
 */
export function storedHistoryFile(rows: number, groups: number): { path: string; seconds: number } {
  const path = join(tmpdir(), `gated-bench-history-${rows}-${groups}.db`);
  if (existsSync(path)) return { path, seconds: 0 };
  const t0 = Date.now();
  const making = `${path}.making`;
  for (const f of [making, `${making}-wal`, `${making}-shm`]) rmSync(f, { force: true });
  const db = openDatabase(making);
  storedHistory(rows, groups)(db);
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  renameSync(making, path);
  return { path, seconds: Math.round((Date.now() - t0) / 100) / 10 };
}

/** The cases of the table: by groups at the same total, then by rows stored at 1,000 groups. */
export function scalingCases(quick: boolean): ScalingCase[] {
  // --quick: a tenth of everything (each group costs at least one run, an agent's spawn).
  const scale = quick ? 10 : 1;
  const total = 100_000 / scale;
  return [
    { groups: 100 / scale, total, stored: 0 },
    { groups: 1000 / scale, total, stored: 0 },
    { groups: 10_000 / scale, total, stored: 0 },
    { groups: 1000 / scale, total, stored: 100_000 / scale },
    { groups: 1000 / scale, total, stored: 1_000_000 / scale },
    { groups: 1000 / scale, total, stored: 10_000_000 / scale },
  ];
}

/** One burst of the table. */
export async function scalingRow(c: ScalingCase, timeoutMs = 900_000): Promise<ScalingRow> {
  const perGroup = c.total / c.groups;
  const history = c.stored ? storedHistoryFile(c.stored, c.groups) : undefined;
  const r = await burst(c.groups, perGroup, timeoutMs, undefined, undefined, {
    inProcessHealth: false,
    ...(history ? { from: history.path } : {}),
  });
  return {
    groups: c.groups,
    perGroup,
    storedBefore: c.stored,
    storedMadeSeconds: history ? history.seconds : null,
    sent: r.sent,
    lost: r.lost,
    duplicates: r.duplicates,
    runs: r.runs,
    wallSeconds: r.wallSeconds,
    gatedCpuSeconds: r.gatedCpuSeconds,
    cpuUsPerMessage: Math.round((r.gatedCpuSeconds * 1e6) / r.sent),
    sqlPerMessage: r.sqlPerMessage,
    eventLoopDelayP99ms: r.eventLoopDelayP99ms,
  };
}

/** The bursts of the scaling table, one after the other. */
export async function scaling(quick: boolean): Promise<ScalingRow[]> {
  const rows: ScalingRow[] = [];
  for (const c of scalingCases(quick)) rows.push(await scalingRow(c, quick ? 300_000 : 900_000));
  return rows;
}
