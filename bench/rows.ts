import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Outbox } from '../delivery/outbox.js';
import { BatchStatements } from '../gateway/batch.js';
import { openDatabase } from '../store/db.js';
import { QueueStore, type BatchRow } from '../store/queue.js';
import { countSql } from './sql-count.js';

/**
 * `npx tsx bench/rows.ts [groups] [perGroup] [rounds]` (default 1000 100 2): what each row's SQL costs, by
 * statement and by step of a row's life (issue 30), without the rest of gated. On a real file, with gated's
 * own statements and transactions, it replays the burst's rows: the external writer's inserts (round-robin
 * over the groups' chats, transactions of 100), the poll batches placing them (released at once, 250 rows a
 * batch), one dispatch per group, a block answering each run with a reply, the run's end, the reply's
 * delivery; `rounds` times, each with perGroup / rounds messages per group. Prints per step the CPU and the
 * WAL pages written per row, and per statement its calls and µs per message.
 *
 * ROWS_SQL: SQL run after the schema (an index to try); ROWS_MMAP: PRAGMA mmap_size of gated's connection;
 * ROWS_PREFILL: answered rows stored before (a history, so that the file outgrows SQLite's page cache).
 */

const [groups = 1000, perGroup = 100, rounds = 2] = process.argv.slice(2).map(Number);
const POLL_BATCH = 250;

interface Step {
  rows: number;
  cpuUs: number;
  wallUs: number;
  walPages: number;
}

const dir = mkdtempSync(join(tmpdir(), 'gated-rows-'));
const path = join(dir, 'gated.db');
const db = openDatabase(path);
if (process.env.ROWS_SQL) db.exec(process.env.ROWS_SQL);
// A history already stored (answered rows of the same groups), so that pages stop fitting the cache.
const prefill = Number(process.env.ROWS_PREFILL ?? 0);
if (prefill > 0)
  db.prepare(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
     INSERT INTO messages (chat_jid, sender, content, state, group_folder, session_topic)
     SELECT 'bench:g' || (i % ?), 'bench', 'an older message ' || i, 'done', 'b/g' || (i % ?), '' FROM n`,
  ).run(prefill, groups, groups);
// Checkpoints happen between steps, untimed: each step's WAL growth is the pages its commits wrote.
db.pragma('wal_autocheckpoint = 0');
if (process.env.ROWS_MMAP) db.pragma(`mmap_size = ${Number(process.env.ROWS_MMAP)}`);
const pageSize = db.pragma('page_size', { simple: true }) as number;
const writer = new Database(path);
writer.pragma('busy_timeout = 10000');
writer.pragma('wal_autocheckpoint = 0');

const steps = new Map<string, Step>();
function step(name: string, rows: number, fn: () => void): void {
  db.pragma('wal_checkpoint(TRUNCATE)');
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  fn();
  const wallUs = (performance.now() - t0) * 1000;
  const c = process.cpuUsage(c0);
  let wal = 0;
  try {
    wal = statSync(`${path}-wal`).size;
  } catch {
    // no WAL yet
  }
  const s = steps.get(name) ?? { rows: 0, cpuUs: 0, wallUs: 0, walPages: 0 };
  s.rows += rows;
  s.cpuUs += c.user + c.system;
  s.wallUs += wallUs;
  s.walPages += wal > 32 ? (wal - 32) / (pageSize + 24) : 0;
  steps.set(name, s);
}

/** The external writer: `n` messages for each group's chat, round-robin, in transactions of 100. */
function write(n: number, firstToken: number): number {
  const insert = writer.prepare(`INSERT INTO messages (chat_jid, sender, content) VALUES (?, 'bench', ?)`);
  const tx = writer.transaction((batch: Array<[string, string]>) => batch.forEach((r) => insert.run(...r)));
  const rows: Array<[string, string]> = [];
  let tok = firstToken;
  for (let i = 0; i < n; i++) for (let g = 0; g < groups; g++) rows.push([`bench:g${g}`, `tok-${tok++}`]);
  for (let i = 0; i < rows.length; i += 100) tx(rows.slice(i, i + 100));
  return rows.length;
}

/** The poll: rows after the cursor read as gateway/loop.ts reads them, placed as gateway/batch.ts does. */
function poll(bs: BatchStatements, cursor: { at: number }, now: number): void {
  const read = db.prepare(
    `SELECT m.id, m.chat_jid, m.sender, m.sender_name, substr(m.content, 1, 262144) AS content, m.verb,
            m.topic, m.platform_msg_id, m.reply_to, m.timestamp, m.is_from_me,
            c.sticky_group AS sticky_group, c.sticky_topic AS sticky_topic
     FROM messages m LEFT JOIN chat_state c ON c.chat_jid = m.chat_jid
     WHERE m.is_from_me = 0 AND m.id > ? AND m.state IS NULL ORDER BY m.id LIMIT ?`,
  );
  const setCursor = db.prepare(`INSERT OR REPLACE INTO router_state (key, value) VALUES ('poll_cursor', ?)`);
  const batch = db.transaction(() => {
    const rows = read.all(cursor.at, POLL_BATCH) as Array<{ id: number; chat_jid: string }>;
    if (rows.length === 0) return 0;
    const hits = new Map<number, number>();
    // One UPDATE a row, as gateway/batch.ts writes them (c162461): state, group, topic, agent_content,
    // target, route_id, weight, threshold, max_hold_ms, held_at, ready_at, interrupts, counted, id.
    for (const r of rows) {
      const g = Number(r.chat_jid.slice('bench:g'.length));
      hits.set(g + 1, (hits.get(g + 1) ?? 0) + 1);
      bs.place.run('ready', `b/g${g}`, '', null, `b/g${g}`, g + 1, 100, 100, 0, now, now, null, null, r.id);
    }
    bs.hits.run(new Date(now).toISOString(), JSON.stringify(Object.fromEntries(hits)));
    cursor.at = rows[rows.length - 1]!.id;
    setCursor.run(String(cursor.at));
    return rows.length;
  });
  while (batch() > 0);
}

function round(qs: QueueStore, bs: BatchStatements, outbox: Outbox, cursor: { at: number }, r: number) {
  const per = Math.ceil(perGroup / rounds);
  const n = groups * per;
  const now = Date.now();
  step('write (external writer)', n, () => write(per, r * n));
  step('poll: place ready', n, () => poll(bs, cursor, now));
  const runs: Array<{ runId: number; rows: BatchRow[]; group: string }> = [];
  step('dispatch: ready → running', n, () => {
    for (let g = 0; g < groups; g++) {
      const d = qs.dispatch({ group: `b/g${g}`, topic: '' }, now);
      if (d && d.runId > 0) runs.push({ runId: d.runId, rows: d.rows, group: `b/g${g}` });
    }
  });
  step('block: running → done, reply', n, () => {
    for (const run of runs)
      qs.commitBlock({ runId: run.runId, through: 1, reply: { content: 'ok', replyTo: run.rows[0]! } });
  });
  step('run ends', n, () => {
    for (const run of runs)
      qs.settle({
        runId: run.runId,
        key: { group: run.group, topic: '' },
        result: 'ok',
        error: null,
        exitCode: 0,
        stderrTail: null,
        endedAt: now,
        idleMs: 0,
        rows: 'done',
        evictSession: false,
        restoreNotes: [],
      });
  });
  step('delivery', n, () => {
    for (const chat of outbox.pendingChats()) {
      for (let row = outbox.next(chat); row; row = outbox.next(chat))
        outbox.recordPart(row.id, row.parts_sent, `p${row.id}`, true);
    }
  });
}

function main(): void {
  const qs = new QueueStore(db);
  const bs = new BatchStatements(db);
  const outbox = new Outbox(db);
  const cursor = { at: 0 };
  const sql = countSql({ timed: true });
  for (let r = 0; r < rounds; r++) round(qs, bs, outbox, cursor, r);
  sql.stop();
  const total = groups * Math.ceil(perGroup / rounds) * rounds;
  const left = db
    .prepare(`SELECT count(*) FROM messages WHERE (is_from_me = 0 AND state <> 'done') OR delivery <> 'sent'`)
    .pluck()
    .get();
  const mb = ((db.pragma('page_count', { simple: true }) as number) * pageSize) / 2 ** 20;
  console.log(
    `${total} messages, ${groups} groups, ${rounds} rounds; rows not done or not sent: ${left}; file ${mb.toFixed(1)} MB`,
  );
  console.log('step                               µs CPU/row  µs wall/row  WAL pages/row');
  for (const [name, s] of steps)
    console.log(
      `${name.padEnd(34)} ${(s.cpuUs / s.rows).toFixed(2).padStart(10)} ${(s.wallUs / s.rows).toFixed(2).padStart(12)} ${(s.walPages / s.rows).toFixed(3).padStart(14)}`,
    );
  console.log('\n  calls  µs/message  statement');
  for (const t of sql.top(Number(process.env.ROWS_TOP ?? 20) + 1).filter((t) => !t.sql.startsWith('PRAGMA')))
    console.log(
      `${String(t.calls).padStart(7)} ${(((t.ms ?? 0) * 1000) / total).toFixed(2).padStart(11)}  ${t.sql}`,
    );
}

try {
  main();
} finally {
  writer.close();
  db.close();
  rmSync(dir, { recursive: true, force: true });
}
