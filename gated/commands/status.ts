import type { Command } from 'commander';
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

/** Runs without a result: agents working now (or interrupted by a crash, until the restart). */
function runningRuns(db: Db, style: TableStyle): string[] {
  const running = db
    .prepare(
      `SELECT id, group_folder, topic, chat_jid, started_at FROM session_log WHERE result IS NULL ORDER BY id`,
    )
    .all() as { id: number; group_folder: string; topic: string; chat_jid: string; started_at: string }[];
  const rows = running.map((r) => [`#${r.id}`, session(r.group_folder, r.topic), r.chat_jid, r.started_at]);
  const table = running.length ? formatTable(['run', 'session', 'chat', 'since'], rows, style) : [];
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

/** The last ten runs with their results. */
function recentRuns(db: Db, style: TableStyle): string[] {
  const recent = db
    .prepare(
      `SELECT id, group_folder, topic, started_at, ended_at, result, error FROM session_log ORDER BY id DESC LIMIT 10`,
    )
    .all() as {
    id: number;
    group_folder: string;
    topic: string;
    started_at: string;
    result: string | null;
    error: string | null;
  }[];
  const rows: Cell[][] = recent.map((r) => [
    `#${r.id}`,
    session(r.group_folder, r.topic),
    r.started_at,
    { text: r.result ?? 'running', tint: resultTint(r.result) },
    { text: r.error ?? '', tint: 'dim' },
  ]);
  const table = recent.length
    ? formatTable(['run', 'session', 'started', 'result', 'error'], rows, style)
    : [];
  return section('recent runs:', table, style);
}

function session(group: string, topic: string | null): string {
  return topic ? `${group}#${topic}` : group;
}

/** `gated status`. */
export function statusCommand(program: Command): void {
  program
    .command('status')
    .description('groups, runs, queues, undelivered replies, recent session_log rows')
    .action(
      action((ctx) => {
        for (const line of statusLines(ctx.db({ readOnly: true }), terminalStyle())) ctx.out(line);
      }),
    );
}
