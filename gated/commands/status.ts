import type { Command } from 'commander';
import { runSplit, type RunSplit } from '../../http/queries.js';
import type { Db } from '../../store/db.js';
import { action } from '../context.js';
import { formatTable, paint, resultTint, terminalStyle, type Cell, type TableStyle } from '../table.js';

/** The instance facts `gated status` prints, read from the database (works beside a running gated). */
export function statusLines(db: Db, style: TableStyle = { aligned: false, color: false }): string[] {
  const groups = db.prepare('SELECT folder FROM registered_groups ORDER BY folder').pluck().all() as string[];
  return [
    `groups (${groups.length}): ${groups.join(', ') || '-'}`,
    ...runningRuns(db, style),
    ...queuedSessions(db, style),
    outboxLine(db, style),
    ...recentRuns(db, style),
  ];
}

/** A section: its bold title, then its table indented (none when it has no rows). */
function section(title: string, table: string[], style: TableStyle): string[] {
  return [paint(title, 'bold', style), ...table.map((l) => `  ${l}`)];
}

/**
 * An open run's state in the dashboard's words: `running` while a turn is in progress (rows of it still
 * `running`), `idle` once its agent answered and waits for a follow-up.
 */
const OPEN_STATE = `CASE WHEN EXISTS (SELECT 1 FROM messages m WHERE m.run_id = session_log.id AND m.state = 'running')
                     THEN 'running' ELSE 'idle' END`;

/** Runs without a result: agents working or waiting now (or interrupted by a crash, until the restart). */
function runningRuns(db: Db, style: TableStyle): string[] {
  const running = db
    .prepare(
      `SELECT id, group_folder, topic, chat_jid, started_at, ${OPEN_STATE} AS state
       FROM session_log WHERE result IS NULL ORDER BY id`,
    )
    .all() as {
    id: number;
    group_folder: string;
    topic: string;
    chat_jid: string;
    started_at: string;
    state: string;
  }[];
  const rows: Cell[][] = running.map((r) => [
    `#${r.id}`,
    { text: r.state, tint: resultTint(r.state) },
    session(r.group_folder, r.topic),
    r.chat_jid,
    r.started_at,
  ]);
  const table = running.length ? formatTable(['run', 'state', 'session', 'chat', 'since'], rows, style) : [];
  return section(`runs (${running.length}):`, table, style);
}

/** Sessions with held, ready or parked rows, by state. */
function queuedSessions(db: Db, style: TableStyle): string[] {
  const queued = db
    .prepare(
      `SELECT group_folder, session_topic, state, count(*) n FROM messages
       WHERE state IN ('held', 'ready', 'parked') GROUP BY group_folder, session_topic, state`,
    )
    .all() as { group_folder: string; session_topic: string; state: string; n: number }[];
  const rows: Cell[][] = queued.map((q) => [
    session(q.group_folder, q.session_topic),
    { text: q.state, tint: resultTint(q.state) },
    q.n,
  ]);
  const table = queued.length ? formatTable(['session', 'state', 'rows'], rows, style) : [];
  return section(`queued sessions (${queued.length}):`, table, style);
}

/** Undelivered replies: pending and failed. */
function outboxLine(db: Db, style: TableStyle): string {
  const count = (delivery: string) =>
    db
      .prepare(`SELECT count(*) FROM messages WHERE is_from_me = 1 AND delivery = ?`)
      .pluck()
      .get(delivery) as number;
  const failed = count('failed');
  const failedText = `${failed} failed`;
  return `undelivered replies: ${count('pending')} pending, ${paint(failedText, failed > 0 ? 'red' : undefined, style)}`;
}

/** The last ten runs: their result (or state while open), and their time worked and idle. */
function recentRuns(db: Db, style: TableStyle): string[] {
  const recent = db
    .prepare(
      `SELECT id, group_folder, topic, started_at, ended_at, idle_ms, error,
              coalesce(result, ${OPEN_STATE}) AS state
       FROM session_log ORDER BY id DESC LIMIT 10`,
    )
    .all() as {
    id: number;
    group_folder: string;
    topic: string;
    started_at: string;
    ended_at: string | null;
    idle_ms: number | null;
    state: string;
    error: string | null;
  }[];
  const rows: Cell[][] = recent.map((r) => {
    const split = runSplit(r.started_at, r.ended_at, r.idle_ms);
    return [
      `#${r.id}`,
      session(r.group_folder, r.topic),
      r.started_at,
      { text: r.state, tint: resultTint(r.state) },
      runTime(r.ended_at, split.work_ms),
      runTime(r.ended_at, split.idle_ms),
      { text: r.error ?? '', tint: 'dim' },
    ];
  });
  const table = recent.length
    ? formatTable(['run', 'session', 'started', 'state', 'worked', 'idle', 'error'], rows, style)
    : [];
  return section('recent runs:', table, style);
}

/**
 * A run's time worked or idle as the dashboard writes it (web/common.js runTime): nothing while the run
 * is open, `?` when it was not recorded (the run ended with a restart of gated).
 */
function runTime(endedAt: string | null, ms: RunSplit['work_ms']): string {
  if (endedAt === null) return '';
  return ms === null ? '?' : duration(ms);
}

/** Milliseconds as the dashboard writes a duration (web/common.js age): 450 ms, 3.2 s, 5 min, 1.5 h. */
export function duration(ms: number): string {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

function session(group: string, topic: string | null): string {
  return topic ? `${group}#${topic}` : group;
}

/** `gated status`. */
export function statusCommand(program: Command): void {
  program
    .command('status')
    .description('groups, runs, queues, undelivered replies, recent runs with their time worked and idle')
    .action(
      action((ctx) => {
        for (const line of statusLines(ctx.db({ readOnly: true }), terminalStyle())) ctx.out(line);
      }),
    );
}
